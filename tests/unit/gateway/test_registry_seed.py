"""The Fleet list seed's retries: 1 s doubling to 30 s, a warning and a metric each time."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import structlog

from contracts.v1 import Connection, MowerListReply, MowerRegistration, encode
from mowdeck.gateway.mowers import FleetFeed
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import BusError

MOWER = MowerRegistration(
    mower_id=uuid.UUID(int=7),
    account_id=uuid.UUID(int=1),
    name="m",
    connection=Connection(kind="simulator"),
)


class FlakyFleet:
    """A bus whose ``fleet.mowers.list`` fails ``failures`` times, in several ways, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def request(self, subject: str, message: Any, *, timeout: float) -> bytes:
        self.calls += 1
        if self.calls <= self.failures:
            if self.calls % 3 == 0:
                raise RuntimeError("connection being replaced")  # not a BusError
            if self.calls % 3 == 1:
                raise BusError(f"no answer on {subject}: TimeoutError")
            return b'{"mowers": "not a list"}'  # a malformed page
        return encode(MowerListReply(mowers=[MOWER]))


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

    bus = FlakyFleet(failures=8)
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
