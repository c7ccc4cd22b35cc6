"""The in-memory erasure against the erasure contract."""

from __future__ import annotations

from tests.unit.notifications.inbox.erasure_contract import ErasureContract


class TestInMemoryErasure(ErasureContract):
    pass
