"""The in-memory store against the store contract."""

from __future__ import annotations

import pytest

from mowdeck.telemetry.memory import InMemoryTelemetryStore
from tests.unit.telemetry.store_contract import StoreContract


@pytest.fixture
def store() -> InMemoryTelemetryStore:
    return InMemoryTelemetryStore()


class TestInMemoryStore(StoreContract):
    pass
