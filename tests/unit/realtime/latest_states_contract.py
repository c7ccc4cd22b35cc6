"""What every ``LatestStates`` adapter answers: run by the memory and the PostgreSQL tests.

``Seeded`` gives an adapter that holds ``states`` as Telemetry's latest (for PostgreSQL:
written by Telemetry's own store, so a change of its table breaks this suite).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from contracts.v1 import MowerState
from mowdeck.realtime.stale import LatestStates
from tests.unit.telemetry.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, state

Seeded = Callable[[list[MowerState]], Awaitable[LatestStates]]
Case = Callable[[Seeded], Awaitable[None]]

OTHER_MOWER = uuid.UUID(int=77)
UNASKED = uuid.UUID(int=78)
NEVER_SEEN = uuid.UUID(int=79)


async def only_the_asked_mowers_of_the_account_come_back(seeded: Seeded) -> None:
    """Neither a mower not asked for nor one of another account."""
    states = await seeded(
        [
            state(0, mower_id=MOWER, battery=11),
            state(0, mower_id=UNASKED, battery=12),
            state(0, mower_id=OTHER_MOWER, account_id=OTHER_ACCOUNT, battery=13),
        ]
    )
    found = await states.latest({MOWER, OTHER_MOWER, NEVER_SEEN}, account_id=ACCOUNT)
    assert [(s.mower_id, s.battery) for s in found] == [(MOWER, 11)]


async def nothing_asked_nothing_answered(seeded: Seeded) -> None:
    """An empty question is answered without looking."""
    states = await seeded([state(0)])
    assert await states.latest(set(), account_id=ACCOUNT) == []


async def the_state_comes_back_whole(seeded: Seeded) -> None:
    """Every field of the state as it was reported: position, raw, optional fields."""
    full = state(
        5,
        battery=42,
        charging=True,
        rtk_source="base-7",
        blade_height_mm=35,
        speed_mps=0.4,
        error_code="E12",
        activity="error",
        raw={"firmware": "1.4.2", "temps": [31, 32]},
    )
    bare = state(6, mower_id=OTHER_MOWER, lat=None, connection=None, rtk_fix="none")
    states = await seeded([full, bare])
    found = await states.latest([MOWER, OTHER_MOWER], account_id=ACCOUNT)
    assert sorted(found, key=lambda s: s.mower_id) == sorted([full, bare], key=lambda s: s.mower_id)


CONTRACT: list[Case] = [
    only_the_asked_mowers_of_the_account_come_back,
    nothing_asked_nothing_answered,
    the_state_comes_back_whole,
]
