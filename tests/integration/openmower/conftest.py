"""A Mosquitto broker per test and stand-in OpenMowers on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from simulator.openmower import StandInOpenMower
from tests.support.mosquitto import Mosquitto, running_mosquitto


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    """An anonymous broker on a free port."""
    async with running_mosquitto(tmp_path) as started:
        yield started


@pytest.fixture
async def mower(broker: Mosquitto) -> AsyncIterator[StandInOpenMower]:
    """One stand-in OpenMower under the prefix ``yard/om1``, docked and charging."""
    standin = StandInOpenMower("127.0.0.1", broker.port, prefix="yard/om1/", period=0.05)
    await standin.start()
    yield standin
    await standin.stop()
