"""The in-memory watch store against the watch contract."""

from __future__ import annotations

from tests.unit.notifications.ingest.watch_contract import WatchContract


class TestInMemoryWatches(WatchContract):
    pass
