"""The read-model adapter: Telemetry's latest rows of the visible mowers of one account."""

from __future__ import annotations

import uuid

from mowdeck.realtime.stale import ReadModelLatestStates
from mowdeck.telemetry.memory import InMemoryTelemetryStore
from tests.unit.telemetry.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, state
from tests.unit.telemetry.store_contract import write

OTHER_MOWER = uuid.UUID(int=77)
UNASKED = uuid.UUID(int=78)


async def test_only_the_asked_mowers_of_the_account_come_back() -> None:
    store = InMemoryTelemetryStore()
    await write(
        store,
        latest=[
            state(0, mower_id=MOWER, battery=11),
            state(0, mower_id=UNASKED),
            state(0, mower_id=OTHER_MOWER, account_id=OTHER_ACCOUNT),
        ],
    )
    states = ReadModelLatestStates(store)
    found = await states.latest({MOWER, OTHER_MOWER}, account_id=ACCOUNT, token=None)
    assert [(s.mower_id, s.battery) for s in found] == [(MOWER, 11)]
    assert await states.latest(set(), account_id=ACCOUNT, token=None) == []
