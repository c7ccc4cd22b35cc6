"""The in-memory ``LatestStates`` held to the adapters' contract."""

from __future__ import annotations

import pytest

from contracts.v1 import MowerState
from mowdeck.realtime.stale import LatestStates, MemoryLatestStates
from tests.unit.realtime.latest_states_contract import CONTRACT, Case


async def _memory(states: list[MowerState]) -> LatestStates:
    return MemoryLatestStates(states)


@pytest.mark.parametrize("case", CONTRACT, ids=[case.__name__ for case in CONTRACT])
async def test_memory_adapter(case: Case) -> None:
    await case(_memory)
