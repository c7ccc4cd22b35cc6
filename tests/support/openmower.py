"""Fixtures for OpenMower tests: a Mosquitto per test and a stand-in OpenMower on it.

Imported by the conftest of each test folder that uses them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from simulator.openmower import StandInOpenMower
from tests.support.mosquitto import Mosquitto, running_mosquitto

__all__ = ["broker", "openmower"]

PREFIX = "yard/om1/"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    """An anonymous broker on a free port."""
    async with running_mosquitto(tmp_path) as started:
        yield started


@pytest.fixture
async def openmower(broker: Mosquitto) -> AsyncIterator[StandInOpenMower]:
    """One stand-in OpenMower under the prefix ``yard/om1``, docked and charging."""
    standin = StandInOpenMower("127.0.0.1", broker.port, prefix=PREFIX, period=0.05)
    await standin.start()
    yield standin
    await standin.stop()
