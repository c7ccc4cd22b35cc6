"""The token's account: a stream shows the mowers of that account alone, whatever the tuples.

Dave views mowers in two accounts (ACCOUNT: MOWER, SECOND; OTHER: FOREIGN). Each of his
tokens names one account, and a stream opened with it shows only that account's mowers,
as Fleet and Telemetry answer only that account's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection

import aiohttp
import pytest

from contracts.v1 import EventEnvelope, MowerState, NotificationSent
from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer, Tuple, account_object, grant_tuples, mower_object
from mowdeck.kit.bus import Bus
from tests.integration.realtime.conftest import (
    ACCOUNT,
    FOREIGN,
    MOWER,
    OTHER,
    SECOND,
    Event,
    MemoryLatestStates,
    Opener,
    ServiceFactory,
    now,
    publish_link,
    publish_result,
    publish_state,
    registration,
    state,
)


@pytest.fixture
async def dave(authorizer: LocalAuthorizer) -> str:
    """A viewer of both accounts."""
    await authorizer.write(
        [*grant_tuples(ACCOUNT, "dave", "viewer"), *grant_tuples(OTHER, "dave", "viewer")]
    )
    return "dave"


async def _notify(bus: Bus, user: str, mower: uuid.UUID) -> None:
    sent = NotificationSent(
        notification_id=uuid.uuid4(),
        user_id=user,
        mower_id=mower,
        kind="stuck",
        severity="warning",
        dedupe_key=uuid.uuid4().hex,
        title="stuck",
    )
    await bus.publish_event(EventEnvelope.new("notifications.sent", sent, producer="n", now=now()))


async def _mower_event(bus: Bus, kind: str, mower: uuid.UUID, account: uuid.UUID) -> None:
    envelope = EventEnvelope.new(kind, registration(mower, account), producer="fleet", now=now())
    await bus.publish_event(envelope)


def _shown(event: Event) -> tuple[str, str, object]:
    return event.type, event.data.get("mower_id"), event.data.get("battery")


async def test_a_token_of_account_b_sees_only_bs_mowers_in_snapshot_live_and_replay(
    bus: Bus,
    make_service: ServiceFactory,
    open_stream: Opener,
    latest_states: MemoryLatestStates,
    dave: str,
) -> None:
    await publish_state(bus, state(MOWER, ACCOUNT, battery=1))
    await publish_state(bus, state(FOREIGN, OTHER, battery=2))
    # SECOND has no message in the stream: the snapshot's fallback (Telemetry) has one.
    latest_states.states[SECOND] = state(SECOND, ACCOUNT, battery=3)
    service = await make_service()
    in_b = await open_stream(service, dave, OTHER)
    in_a = await open_stream(service, dave, ACCOUNT)  # the control: the same user in A
    snapshot = await in_b.next()
    assert snapshot.data["mowers"] == [str(FOREIGN)]
    assert [(s["mower_id"], s["battery"]) for s in snapshot.data["states"]] == [(str(FOREIGN), 2)]
    control = await in_a.next()
    assert sorted(control.data["mowers"]) == sorted([str(MOWER), str(SECOND)])
    assert sorted(s["battery"] for s in control.data["states"]) == [1, 3]

    # Live: an A state, result, link and notification, then a B state as the sentinel.
    await publish_state(bus, state(MOWER, ACCOUNT, battery=4))
    await publish_result(bus, MOWER)
    await publish_link(bus, MOWER)
    await _notify(bus, dave, MOWER)
    await publish_state(bus, state(FOREIGN, OTHER, battery=5))
    sentinel = await in_b.next()
    assert _shown(sentinel) == ("state", str(FOREIGN), 5)
    got = sorted([(await in_a.next()).type for _ in range(4)])
    assert got == ["command", "link", "notification", "state"]

    # Replay: what B missed while away is B's alone.
    await in_b.close()
    await publish_state(bus, state(MOWER, ACCOUNT, battery=6))
    await publish_result(bus, MOWER)
    await publish_link(bus, MOWER)
    await _notify(bus, dave, MOWER)
    await publish_state(bus, state(FOREIGN, OTHER, battery=7))
    again = await open_stream(service, dave, OTHER, headers={"Last-Event-ID": sentinel.id})
    assert _shown(await again.next()) == ("state", str(FOREIGN), 7)
    await publish_state(bus, state(FOREIGN, OTHER, battery=8))  # live, after the replay
    assert _shown(await again.next()) == ("state", str(FOREIGN), 8)
    assert service.metrics.resumes._value.get() == 1


async def test_a_mower_of_another_account_is_not_found_for_the_token(
    make_service: ServiceFactory, http: aiohttp.ClientSession, issuer: TokenIssuer, dave: str
) -> None:
    service = await make_service()
    token = issuer.mint(dave, OTHER)
    async with http.get(
        f"{service.url}/v1/stream?mowers={MOWER}", headers={"Authorization": f"Bearer {token}"}
    ) as response:
        assert response.status == 404


@pytest.mark.parametrize("fleet_mowers", [{}], ids=["fleet-lists-nothing"])
async def test_a_mower_of_no_known_account_is_shown_once_its_account_is_known(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener, fleet_mowers: object
) -> None:
    # The tuples make MOWER and SECOND visible to alice, but neither Fleet nor a state has
    # said whose they are yet: fail closed.
    service = await make_service(realtime_authz_refresh_seconds=60)
    reader = await open_stream(service)
    assert (await reader.next()).data == {"mowers": [], "states": []}
    await _mower_event(bus, "mower.registered", MOWER, ACCOUNT)
    access = await reader.next()
    assert (access.type, access.data["added"]) == ("access", [str(MOWER)])
    # A state names its account too (SECOND, as the gateway stamps it).
    await publish_state(bus, state(SECOND, ACCOUNT, battery=9))
    access = await reader.next()
    assert (access.type, access.data["added"]) == ("access", [str(SECOND)])
    assert _shown(await reader.next()) == ("state", str(SECOND), 9)


async def test_a_mower_moved_to_another_account_leaves_the_old_accounts_streams(
    bus: Bus,
    make_service: ServiceFactory,
    open_stream: Opener,
    authorizer: LocalAuthorizer,
) -> None:
    await publish_state(bus, state(MOWER, ACCOUNT, battery=20))  # reported while ACCOUNT's
    service = await make_service(realtime_authz_refresh_seconds=60)
    alice = await open_stream(service, "alice", ACCOUNT)
    carol = await open_stream(service, "carol", OTHER)
    await alice.next()
    await carol.next()
    # The old account's tuple is left behind (a cleanup that failed): the data decides.
    await authorizer.write([Tuple(account_object(OTHER), "account", mower_object(MOWER))])
    await _mower_event(bus, "mower.updated", MOWER, OTHER)
    left = await alice.next()
    assert (left.type, left.data) == ("access", {"added": [], "removed": [str(MOWER)]})
    joined = await carol.next()
    assert (joined.type, joined.data["added"]) == ("access", [str(MOWER)])
    # No state follows the access event: the one held was reported for ACCOUNT.
    await publish_state(bus, state(MOWER, OTHER, battery=10))
    await publish_link(bus, MOWER)
    await publish_link(bus, SECOND)  # alice's sentinel
    assert _shown(await carol.next()) == ("state", str(MOWER), 10)
    assert (await carol.next()).data["mower_id"] == str(MOWER)
    sentinel = await alice.next()
    assert (sentinel.type, sentinel.data["mower_id"]) == ("link", str(SECOND))


async def test_a_state_naming_another_account_than_fleets_is_shown_to_neither(
    bus: Bus, make_service: ServiceFactory, open_stream: Opener
) -> None:
    service = await make_service()
    alice = await open_stream(service, "alice", ACCOUNT)
    carol = await open_stream(service, "carol", OTHER)
    snapshot = await alice.next()
    await carol.next()
    # Fleet says MOWER is ACCOUNT's; a state stamped OTHER (a stale stamp) goes nowhere.
    await publish_state(bus, state(MOWER, OTHER, battery=11))
    await publish_state(bus, state(SECOND, ACCOUNT, battery=12))
    await publish_state(bus, state(FOREIGN, OTHER, battery=13))
    assert _shown(await alice.next()) == ("state", str(SECOND), 12)
    assert _shown(await carol.next()) == ("state", str(FOREIGN), 13)
    # Nor in a replay, nor in a new stream's snapshot, where it is MOWER's latest.
    resumed = await open_stream(service, "alice", ACCOUNT, headers={"Last-Event-ID": snapshot.id})
    assert _shown(await resumed.next()) == ("state", str(SECOND), 12)
    fresh = await (await open_stream(service, "alice", ACCOUNT)).next()
    assert sorted(fresh.data["mowers"]) == sorted([str(MOWER), str(SECOND)])
    assert [(s["mower_id"], s["battery"]) for s in fresh.data["states"]] == [(str(SECOND), 12)]


class Unscoped(MemoryLatestStates):
    """A port that answers whatever it holds, of any account (an adapter's bug)."""

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID
    ) -> list[MowerState]:
        return [self.states[m] for m in mowers if m in self.states]


async def test_a_fallback_state_of_another_account_is_left_out_of_the_snapshot(
    make_service: ServiceFactory, open_stream: Opener
) -> None:
    # SECOND is ACCOUNT's, the state the port holds was reported for OTHER, and MOWER's is
    # ACCOUNT's: the snapshot holds its own line whatever the port answers.
    states = Unscoped([state(SECOND, OTHER, battery=14), state(MOWER, ACCOUNT, battery=15)])
    service = await make_service(states=states)
    snapshot = await (await open_stream(service, "alice", ACCOUNT)).next()
    assert [(s["mower_id"], s["battery"]) for s in snapshot.data["states"]] == [(str(MOWER), 15)]
