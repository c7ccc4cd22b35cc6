"""Command results into the timeline: stored once, counted, and dropped when refused."""

from __future__ import annotations

import uuid

import pytest
import structlog
from prometheus_client import CollectorRegistry

from contracts.v1 import CommandResult, encode
from contracts.v1.subjects import result_subject
from mowdeck.kit.consumer import settle
from mowdeck.telemetry.errors import StoreRejectedError
from mowdeck.telemetry.memory import InMemoryTelemetryStore
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.model import TimelineRow
from mowdeck.telemetry.results import ResultHandler
from tests.support.fakes import FakeMsg
from tests.unit.telemetry.samples import ACCOUNT, MOWER, T0, at

pytestmark = pytest.mark.timeout(10)


def delivered(result: CommandResult) -> FakeMsg:
    """``result`` as the handler gets it from the stream."""
    return FakeMsg(encode(result), result_subject(result.mower_id))


class RefusingStore(InMemoryTelemetryStore):
    """Refuses a reason with a NUL character, as PostgreSQL does."""

    async def add_timeline(self, row: TimelineRow) -> bool:
        if row.reason is not None and "\x00" in row.reason:
            raise StoreRejectedError("invalid byte sequence for encoding UTF8: 0x00")
        return await super().add_timeline(row)


@pytest.fixture
async def store() -> RefusingStore:
    s = RefusingStore()
    await s.register_mower(MOWER, ACCOUNT, T0)
    return s


def _handler(store: InMemoryTelemetryStore, registry: CollectorRegistry) -> ResultHandler:
    metrics = TelemetryMetrics(registry)
    return ResultHandler(store, metrics, unknown_attempts=3, retry_delay=1.0)


def _result(status: str = "accepted", reason: str | None = None) -> CommandResult:
    return CommandResult(
        command_id=uuid.UUID(int=1), mower_id=MOWER, status=status, at=at(1), reason=reason
    )


async def test_stored_results_are_counted_as_timeline_rows(store: RefusingStore) -> None:
    registry = CollectorRegistry()
    handler = _handler(store, registry)
    for result in (_result("accepted"), _result("accepted"), _result("executed")):
        assert await settle(delivered(result), handler.handle, consumer="test") == "ack"
    sample = registry.get_sample_value
    assert sample("mowdeck_telemetry_rows_written_total", {"table": "command_timeline"}) == 2
    assert sample("mowdeck_telemetry_timeline_rows_total") == 2


async def test_a_result_the_store_refuses_is_terminated(store: RefusingStore) -> None:
    registry = CollectorRegistry()
    handler = _handler(store, registry)
    msg = delivered(_result("failed", reason="motor\x00stalled"))
    with structlog.testing.capture_logs() as logs:
        assert await settle(msg, handler.handle, consumer="test") == "term"
    assert msg.settled == ["term"]
    assert (
        registry.get_sample_value(
            "mowdeck_telemetry_dropped_total", {"reason": "rejected-by-store"}
        )
        == 1
    )
    [entry] = [e for e in logs if e["event"] == "result refused by the store, dropped"]
    assert entry["log_level"] == "warning"
    assert (entry["mower_id"], entry["command_id"]) == (str(MOWER), str(uuid.UUID(int=1)))
    assert "0x00" in entry["error"]
    assert await store.timeline(ACCOUNT, MOWER, T0, at(60), 10) == []
