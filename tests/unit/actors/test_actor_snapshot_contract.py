"""Every SnapshotStore adapter passes the same contract; durable adapters add their params."""

from __future__ import annotations

import pytest

from actors import InMemorySnapshotStore, SnapshotStore
from actors.testing import SnapshotStoreContract


@pytest.fixture(params=["in-memory"])
def store(request: pytest.FixtureRequest) -> SnapshotStore:
    match request.param:
        case "in-memory":
            return InMemorySnapshotStore()
    raise AssertionError(request.param)


class TestSnapshotStoreContract(SnapshotStoreContract):
    pass


def test_in_memory_store_is_a_snapshot_store() -> None:
    store: SnapshotStore = InMemorySnapshotStore()
    assert isinstance(store, InMemorySnapshotStore)
