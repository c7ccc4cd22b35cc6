"""The in-memory schedule store holds to the store's contract."""

from __future__ import annotations

import uuid

import pytest

from mowdeck.fleet.schedules.memory import MemoryScheduleStore, MemorySiteDirectory
from tests.unit.fleet.schedules.store_contract import ACCOUNT, StoreContract


class MemoryWorld:
    def __init__(self) -> None:
        self.sites = MemorySiteDirectory()
        self.store = MemoryScheduleStore(self.sites)

    async def add_site(self, timezone: str) -> uuid.UUID:
        site = uuid.uuid4()
        self.sites.sites[site] = (ACCOUNT, timezone)
        return site

    async def add_mower(self, site: uuid.UUID | None) -> uuid.UUID:
        mower = uuid.uuid4()
        self.sites.mowers[mower] = site
        return mower


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def world(self) -> MemoryWorld:
        return MemoryWorld()
