"""Replicas on one queue group, the offline timer on every replica, restarts, a crash."""

from __future__ import annotations

import time

import asyncpg

from mowdeck.kit.bus import Bus
from mowdeck.notifications.infra import Stores
from tests.support.eventually import eventually
from tests.unit.notifications.samples import MOWER, OTHER_MOWER, at, state

from .conftest import (
    Clock,
    Member,
    ServiceFactory,
    counted,
    decided,
    inbox,
    publish_states,
    scan_rounds_pass,
)

USER = "ute"


async def test_two_replicas_racing_on_one_mower_notify_once(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    # Small batches and no linger: the queue group spreads the mower's states over both.
    a = await make_service(notifications_state_batch_max=1, notifications_state_batch_linger_ms=0)
    b = await make_service(notifications_state_batch_max=1, notifications_state_batch_linger_ms=0)
    clock.now = at(100)
    states = [state(0, battery=50)]
    states += [state(1 + i * 0.5, battery=max(50 - i, 15)) for i in range(60)]
    await publish_states(bus, states)

    def evaluated() -> float:
        return counted(a, "states_evaluated") + counted(b, "states_evaluated")

    await eventually(lambda: evaluated() == len(states), what="every state evaluated")
    assert counted(a, "states_evaluated") > 0
    assert counted(b, "states_evaluated") > 0, "the queue group gave one replica everything"
    # Every state is committed, and with it every decision: one, so one item at most.
    assert decided(a) + decided(b) == 1
    assert counted(a, "events", kind="battery_low") + counted(b, "events", kind="battery_low") == 1
    await eventually(lambda: inbox(stores, USER))
    assert [i.kind for i in await inbox(stores, USER)] == ["battery_low"]


async def test_offline_timer_on_two_replicas_fires_once(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    a = await make_service()
    b = await make_service()
    await publish_states(bus, [state(0), state(0, mower_id=OTHER_MOWER)])
    await eventually(lambda: counted(a, "states_evaluated") + counted(b, "states_evaluated") == 2)
    clock.now = at(125)
    await eventually(lambda: _count(stores, USER, 2), what="two mower_offline")
    await scan_rounds_pass(a)
    await scan_rounds_pass(b)
    assert decided(a) + decided(b) == 2  # nothing more was decided in later rounds
    items = await inbox(stores, USER)
    assert sorted((i.kind, i.mower_id) for i in items) == sorted(
        [("mower_offline", MOWER), ("mower_offline", OTHER_MOWER)]
    )
    fired = counted(a, "events", kind="mower_offline") + counted(b, "events", kind="mower_offline")
    assert fired == 2  # one per mower, never one per replica
    assert counted(a, "offline_claims") + counted(b, "offline_claims") >= 2


async def _count(stores: Stores, user: str, n: int) -> bool:
    return len(await inbox(stores, user)) >= n


async def test_service_down_longer_than_the_threshold_sends_no_storm(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    first = await make_service()
    await publish_states(bus, [state(0), state(0, mower_id=OTHER_MOWER)])
    await eventually(lambda: counted(first, "states_evaluated") == 2)
    await first.stop()
    clock.now = at(1000)  # the service was down for far longer than offline_after
    second = await make_service()
    await scan_rounds_pass(second)
    assert decided(second) == 0
    assert await inbox(stores, USER) == []
    # One mower reports after the restart; the other stays silent and is told after
    # offline_after counted from the restart, not from its last state.
    clock.now = at(1010)
    await publish_states(bus, [state(1010)])
    await eventually(lambda: counted(second, "states_evaluated") == 1)
    clock.now = at(1000 + 121)
    items = await eventually(lambda: inbox(stores, USER), what="the silent mower's offline")
    assert [(i.kind, i.mower_id) for i in items] == [("mower_offline", OTHER_MOWER)]


async def test_nats_outage_does_not_count_as_silence(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    service = await make_service()
    await publish_states(bus, [state(0)])
    await eventually(lambda: counted(service, "states_evaluated") == 1)
    before = service.parts.ingest.consuming.since
    # The connection drops and comes back while the clock runs past offline_after. The
    # clock moves only once the client knows it is down: a scan in between the cut and
    # the client noticing could not know of an outage that, for it, had not begun.
    nc = service.parts.infra.bus.nc
    transport = nc._transport  # cut the socket under the client; it reconnects
    assert transport is not None and nc._current_server is not None
    # Held down for a moment (nats-py waits reconnect_time_wait after an attempt).
    nc.options["reconnect_time_wait"] = 0.5
    nc._current_server.last_attempt = time.monotonic()
    transport.close()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
    await eventually(lambda: not nc.is_connected, what="the client down")
    clock.now = at(200)
    await eventually(lambda: nc.stats["reconnects"] >= 1, what="a reconnect")
    await eventually(lambda: service.parts.ingest.consuming.since > before)
    await scan_rounds_pass(service)
    assert decided(service) == 0
    assert await inbox(stores, USER) == []
    clock.now = at(200 + 121)
    items = await eventually(lambda: inbox(stores, USER))
    assert [i.kind for i in items] == ["mower_offline"]


async def test_a_crash_between_the_rules_commit_and_the_fanout_delays_only(  # noqa: PLR0917 - pytest fixtures
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    pool: asyncpg.Pool,
    clock: Clock,
) -> None:
    await member(USER)
    # A replica that commits the rules' decisions and stops before any fan-out.
    crashed = await make_service(fanout=False)
    clock.now = at(20)
    await publish_states(bus, [state(0, battery=50), state(10, battery=15)])
    await eventually(lambda: counted(crashed, "events", kind="battery_low") == 1)
    await crashed.stop()
    assert await pool.fetchval("SELECT count(*) FROM notification_pending") == 1
    assert await inbox(stores, USER) == []
    await make_service()
    items = await eventually(lambda: inbox(stores, USER), what="the delayed notification")
    assert [i.kind for i in items] == ["battery_low"]
    assert await pool.fetchval("SELECT count(*) FROM notification_pending") == 0
