"""The hub without a bus: the deny-list at registration, and the accounts of mowers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from contracts.v1 import MowerRegistration
from contracts.v1.fleet import Connection
from mowdeck.authn import Denial, MemoryDenyList
from mowdeck.realtime.buffer import SendBuffer
from mowdeck.realtime.client import Client
from mowdeck.realtime.frames import EVENT_TYPES
from mowdeck.realtime.hub import Hub
from mowdeck.realtime.metrics import RealtimeMetrics

ACCOUNT, OTHER = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
MOWER, SECOND = uuid.UUID(int=1), uuid.UUID(int=2)


def hub(denylist: MemoryDenyList | None = None) -> Hub:
    # The bus is only used by start(), which these tests do not call.
    no_bus: Any = None
    return Hub(no_bus, RealtimeMetrics(CollectorRegistry()), denylist or MemoryDenyList())


def client(
    user: str, account: uuid.UUID = ACCOUNT, visible: frozenset[uuid.UUID] = frozenset({MOWER})
) -> Client:
    return Client(
        user_id=user,
        account_id=account,
        transport="sse",
        types=EVENT_TYPES,
        requested=None,
        visible=visible,
        buffer=SendBuffer(max_events=100, max_lag=30),
    )


def listed(mower: uuid.UUID, account: uuid.UUID) -> MowerRegistration:
    return MowerRegistration(
        mower_id=mower, account_id=account, name="m", connection=Connection(kind="simulator")
    )


def held(h: Hub, mower: uuid.UUID, account: uuid.UUID, battery: int) -> None:
    """A state the hub read from TELEMETRY (as its subscription keeps it)."""
    data = b'{"mower_id":"%s","battery":%d}' % (str(mower).encode(), battery)
    h.mowers.report(mower, data, account, datetime.now(UTC))


def sent(c: Client) -> list[tuple[str, object]]:
    return [(f.type, msgspec.json.decode(f.data)) for f in c.buffer.take()]


def denial(user: str, reason: str) -> Denial:
    return Denial(user_id=user, reason=reason, at=datetime.now(UTC))  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", ["disabled", "deleted"])
async def test_a_stream_registered_after_its_users_denial_is_closed_at_once(reason: str) -> None:
    # The route's check came before its awaits; the denial arrived meanwhile.
    denylist = MemoryDenyList()
    h = hub(denylist)
    await denylist.deny(denial("alice", reason))
    alice, bob = client("alice"), client("bob")
    h.register(alice)
    h.register(bob)
    assert (alice.closed, bob.closed) == (f"user-{reason}", None)


async def test_a_mower_of_no_known_account_is_shown_once_fleets_list_names_it() -> None:
    h = hub()
    asked: list[list[Client]] = []
    h.on_refresh = lambda clients: asked.append(list(clients or ()))
    visible = frozenset({MOWER, SECOND})
    assert h.scoped(visible, ACCOUNT) == frozenset()  # fail closed
    alice = client("alice", visible=h.scoped(visible, ACCOUNT))
    h.register(alice)
    await h.apply_fleet_list([listed(MOWER, ACCOUNT), listed(SECOND, OTHER)])
    assert asked == [[alice]]  # ACCOUNT's streams look their mowers up again
    assert h.scoped(visible, ACCOUNT) == frozenset({MOWER})
    h.update_visible(alice, visible)
    assert alice.mowers == {MOWER}
    assert sent(alice) == [("access", {"added": [str(MOWER)], "removed": []})]


async def test_fleets_list_moving_a_mower_takes_it_from_the_old_accounts_streams_at_once() -> None:
    h = hub()
    held(h, MOWER, ACCOUNT, 40)  # known from its state only
    held(h, SECOND, ACCOUNT, 41)
    alice = client("alice", visible=h.scoped({MOWER, SECOND}, ACCOUNT))
    h.register(alice)
    assert alice.mowers == {MOWER, SECOND}
    await h.apply_fleet_list([listed(MOWER, OTHER), listed(SECOND, ACCOUNT)])
    assert alice.mowers == {SECOND}
    assert sent(alice) == [("access", {"added": [], "removed": [str(MOWER)]})]


def test_a_snapshot_leaves_out_a_held_state_of_another_account() -> None:
    h = hub()
    held(h, MOWER, OTHER, 50)  # reported for OTHER, and Fleet says ACCOUNT
    held(h, SECOND, ACCOUNT, 51)
    h.mowers.assign(MOWER, ACCOUNT)
    h.mowers.assign(SECOND, ACCOUNT)
    alice = client("alice", visible=h.scoped({MOWER, SECOND}, ACCOUNT))
    h.register(alice)
    states, missing = h.snapshot(alice)
    assert [msgspec.json.decode(d)["battery"] for d in states] == [51]
    assert missing == set()  # not asked of Telemetry either: shown without a state
