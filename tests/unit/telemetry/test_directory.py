"""The directory seed: asks Fleet until it answers, whatever fails in between."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import asyncpg
import pytest
import structlog

from contracts.v1 import MowerListReply, MowerRegistration, encode
from contracts.v1.fleet import Connection
from mowdeck.kit.bus import Bus, BusError
from mowdeck.telemetry.directory import directory_seed
from mowdeck.telemetry.memory import InMemoryTelemetryStore
from tests.support.fakes import FakeBus
from tests.unit.telemetry.samples import ACCOUNT, MOWER

pytestmark = pytest.mark.timeout(10)


def fleet_answering(failures: Sequence[Exception] = ()) -> FakeBus:
    """A bus whose ``fleet.mowers.list`` answers one page, after the failures given."""
    registration = MowerRegistration(
        mower_id=MOWER, account_id=ACCOUNT, name="m", connection=Connection(kind="simulator")
    )
    return FakeBus(replies=failures, reply=encode(MowerListReply(mowers=[registration])))


class FailingStore(InMemoryTelemetryStore):
    """Fails its first seeds with the exceptions given."""

    def __init__(self, failures: Sequence[Exception]) -> None:
        super().__init__()
        self.failures = list(failures)

    async def seed_directory(self, entries: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> int:
        if self.failures:
            raise self.failures.pop(0)
        return await super().seed_directory(entries)


class Sleeps:
    """Records the backoff instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.mark.parametrize(
    "failure",
    [
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
        asyncpg.exceptions.UndefinedTableError('relation "mower_directory" does not exist'),
        RuntimeError("a bug"),
    ],
    ids=["asyncpg-interface", "asyncpg-server", "anything"],
)
async def test_the_seed_retries_whatever_the_store_raises(failure: Exception) -> None:
    store, sleep = FailingStore([failure, failure]), Sleeps()
    fleet = fleet_answering()
    bus: Bus = fleet  # type: ignore[assignment]
    with structlog.testing.capture_logs() as logs:
        seeded = await directory_seed(
            bus,
            store,
            timeout=1.0,
            retry_initial=1.0,
            retry_max=1.5,
            sleep=sleep,
        ).run()
    assert seeded == 1
    assert await store.directory_account(MOWER) == ACCOUNT
    assert len(fleet.requests) == 3
    assert sleep.delays == [1.0, 1.5]
    warnings = [e for e in logs if e["event"] == "fleet mower list failed; retrying"]
    assert [(e["log_level"], e["error_type"]) for e in warnings] == [
        ("warning", type(failure).__name__)
    ] * 2
    assert all(e["error"] == str(failure) for e in warnings)


async def test_the_seed_retries_until_fleet_answers() -> None:
    fleet, sleep = fleet_answering([BusError("no answer"), BusError("no answer")]), Sleeps()
    store = InMemoryTelemetryStore()
    bus: Bus = fleet  # type: ignore[assignment]
    assert await directory_seed(bus, store, timeout=1.0, sleep=sleep).run() == 1
    assert sleep.delays == [1.0, 2.0]
