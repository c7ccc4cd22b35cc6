"""Every SnapshotStore adapter passes the same contract; durable adapters add their params."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Sequence

import pytest

import actors
from actors import InMemorySnapshotStore, PrefetchedSnapshots, Snapshot, SnapshotStore
from actors.testing import SnapshotStoreContract


def _prefetched() -> PrefetchedSnapshots:
    """Prefetching in front of an in-memory store (read many, save through)."""
    inner = InMemorySnapshotStore()

    async def read(keys: Sequence[str]) -> dict[str, Snapshot]:
        found = {key: await inner.load(key) for key in keys}
        return {key: snapshot for key, snapshot in found.items() if snapshot is not None}

    return PrefetchedSnapshots(read, inner.save)


# Every store in actors/, by fixture id: the contract runs against each.
STORES: dict[str, Callable[[], SnapshotStore]] = {
    "in-memory": InMemorySnapshotStore,
    "prefetched": _prefetched,
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest) -> SnapshotStore:
    return STORES[request.param]()


class TestSnapshotStoreContract(SnapshotStoreContract):
    pass


def _snapshot_stores_in_actors() -> set[type]:
    """Classes defined in `actors` with async `load` and `save`, the port itself aside."""
    found: set[type] = set()
    for info in pkgutil.iter_modules(actors.__path__):
        module = importlib.import_module(f"actors.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__.startswith("actors.")
                and not getattr(value, "_is_protocol", False)
                and inspect.iscoroutinefunction(getattr(value, "load", None))
                and inspect.iscoroutinefunction(getattr(value, "save", None))
            ):
                found.add(value)
    return found


def test_the_contract_runs_against_every_store_in_actors() -> None:
    # A store added to actors/ without a STORES entry would escape the contract.
    assert {type(make()) for make in STORES.values()} == _snapshot_stores_in_actors()
