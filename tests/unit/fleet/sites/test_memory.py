"""The in-memory site store against the site repository contract."""

from __future__ import annotations

import pytest

from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.sites.memory import InMemorySiteRepository
from tests.unit.fleet.sites.site_repository_contract import *  # noqa: F403 - the contract


@pytest.fixture
def repo() -> InMemoryMowerRepository:
    return InMemoryMowerRepository()


@pytest.fixture
def sites(repo: InMemoryMowerRepository) -> InMemorySiteRepository:
    return InMemorySiteRepository(repo)
