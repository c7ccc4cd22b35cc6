"""The Fleet list seed's retries: 1 s doubling to 30 s, a warning and a metric each time."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import structlog

from contracts.v1 import Connection, MowerListReply, MowerRegistration, encode
from mowdeck.gateway.mowers import FleetFeed
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import BusError
from tests.support.fakes import FakeBus

MOWER = MowerRegistration(
    mower_id=uuid.UUID(int=7),
    account_id=uuid.UUID(int=1),
    name="m",
    connection=Connection(kind="simulator"),
)


# ``fleet.mowers.list`` failing in each way there is, in turn: no answer, a malformed page,
# an error that is not a BusError.
FAILURES: list[bytes | BaseException] = [
    BusError("no answer on fleet.mowers.list: TimeoutError"),
    b'{"mowers": "not a list"}',
    RuntimeError("connection being replaced"),
]


async def test_the_seed_retries_from_1_s_doubling_to_30_s_until_fleet_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delays: list[float] = []

    async def no_wait(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(asyncio, "sleep", no_wait)  # the feed sleeps through asyncio.sleep
    settings = GatewaySettings()
    applied: list[MowerRegistration] = []
    retries = 0

    async def apply(registration: MowerRegistration) -> None:
        applied.append(registration)

    async def remove(mower_id: uuid.UUID) -> None:
        raise AssertionError("nothing is removed")

    def on_retry() -> None:
        nonlocal retries
        retries += 1

    bus = FakeBus(replies=(FAILURES * 3)[:8], reply=encode(MowerListReply(mowers=[MOWER])))
    feed = FleetFeed(
        bus,  # type: ignore[arg-type]
        shard_index=0,
        shard_count=1,
        on_apply=apply,
        on_remove=remove,
        on_retry=on_retry,
        request_timeout=settings.fleet_list_timeout_seconds,
        retry_initial=settings.fleet_retry_initial_seconds,
        retry_max=settings.fleet_retry_max_seconds,
    )
    with structlog.testing.capture_logs() as logs:
        await asyncio.wait_for(feed._seed(), 5)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert retries == 8
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [w["attempt"] for w in warnings] == list(range(1, 9))
    assert all(w["error"] for w in warnings)
    assert applied == [MOWER]
    assert feed.seeded.is_set()
