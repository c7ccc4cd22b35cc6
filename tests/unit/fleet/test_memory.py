"""The in-memory adapters against the repository contract."""

from __future__ import annotations

import pytest

from mowdeck.fleet.memory import (
    InMemoryAuditTrail,
    InMemoryCommandLog,
    InMemoryMowerRepository,
    InMemoryPruning,
)
from tests.unit.fleet.repository_contract import *  # noqa: F403 - the shared contract tests


@pytest.fixture
def repo() -> InMemoryMowerRepository:
    return InMemoryMowerRepository()


@pytest.fixture
def command_log() -> InMemoryCommandLog:
    return InMemoryCommandLog()


@pytest.fixture
def audit_trail(command_log: InMemoryCommandLog) -> InMemoryAuditTrail:
    return InMemoryAuditTrail(command_log)


@pytest.fixture
def pruning(repo: InMemoryMowerRepository, command_log: InMemoryCommandLog) -> InMemoryPruning:
    return InMemoryPruning(repo, command_log)
