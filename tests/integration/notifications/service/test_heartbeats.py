"""Heartbeats that only move a watch's contact are touches; the offline timer still counts
from the true last contact, on one replica and on two."""

from __future__ import annotations

from mowdeck.kit.bus import Bus
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.service import NotificationsService
from tests.support.eventually import eventually
from tests.unit.notifications.samples import MOWER, at, state

from .conftest import Clock, Member, ServiceFactory, counted, inbox, publish_states

USER = "hanna"


def _total(services: list[NotificationsService], name: str, **labels: str) -> float:
    return sum(counted(s, name, **labels) for s in services)


async def _scan_at(clock: Clock, seconds: float, services: list[NotificationsService]) -> float:
    """Set the clock, run a scan round on every replica; the mower_offline events so far."""
    clock.now = at(seconds)
    for service in services:
        await service.parts.ingest.scan.round()
    return _total(services, "events", kind="mower_offline")


async def test_touched_heartbeats_move_the_offline_timer_exactly(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    service = await make_service()
    for n, seconds in enumerate(range(0, 101, 10), start=1):
        clock.now = at(seconds)
        await publish_states(bus, [state(seconds, battery=80)])
        await eventually(lambda n=n: counted(service, "states_evaluated") == n)
    # The first state created the watch; the ten heartbeats after it were touches.
    assert counted(service, "watches_written", source="states") == 1
    assert counted(service, "watches_written", source="contact") == 10
    [stored] = (await stores.watches.read_watches([MOWER])).values()
    assert (stored.observed_at, stored.contact_at) == (at(100), at(100))

    # The stored due time is still the first state's (a lower bound): the scan claims
    # the watch then, finds the contact newer, and does not fire before 100 + 120 s.
    assert await _scan_at(clock, 120, [service]) == 0
    assert counted(service, "offline_claims") >= 1
    assert await _scan_at(clock, 219.9, [service]) == 0
    assert await _scan_at(clock, 220, [service]) == 1
    items = await eventually(lambda: inbox(stores, USER), what="mower_offline")
    assert [(i.kind, i.params["since"]) for i in items] == [("mower_offline", at(100).isoformat())]


async def test_two_replicas_touching_one_mower_fire_once_and_keep_the_newest_contact(
    make_service: ServiceFactory,
    member: Member,
    bus: Bus,
    stores: Stores,
    clock: Clock,
) -> None:
    await member(USER)
    # Batches of one, no linger: the queue group spreads the mower's states over both.
    a = await make_service(notifications_state_batch_max=1, notifications_state_batch_linger_ms=0)
    b = await make_service(notifications_state_batch_max=1, notifications_state_batch_linger_ms=0)
    replicas = [a, b]
    clock.now = at(100)
    states = [state(float(s), battery=80) for s in range(41)]
    states += [state(41 + s * 0.5, battery=15) for s in range(40)]  # low from 41 s on
    await publish_states(bus, states)
    await eventually(lambda: _total(replicas, "states_evaluated") == len(states))
    assert counted(a, "states_evaluated") > 0
    assert counted(b, "states_evaluated") > 0, "the queue group gave one replica everything"
    assert _total(replicas, "watches_written", source="contact") > 0, "no heartbeat touched"

    assert _total(replicas, "events", kind="battery_low") == 1
    [stored] = (await stores.watches.read_watches([MOWER])).values()
    assert stored.observed_at == at(60.5)  # the newest state, whichever replica had it
    assert stored.battery_armed_at is None  # fired, and not re-armed by a stale replica

    # Contact was at 100 s (the service's clock): offline is due at 220 s, not before.
    assert await _scan_at(clock, 219.9, replicas) == 0
    assert await _scan_at(clock, 220, replicas) == 1
    await eventually(lambda: _has(stores, 2), what="battery_low and mower_offline")
    items = await inbox(stores, USER)
    assert sorted(i.kind for i in items) == ["battery_low", "mower_offline"]
    [offline] = [i for i in items if i.kind == "mower_offline"]
    assert offline.params["since"] == at(60.5).isoformat()


async def _has(stores: Stores, n: int) -> bool:
    return len(await inbox(stores, USER)) >= n
