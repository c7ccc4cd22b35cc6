"""A gateway shard against a real NATS server and a real in-process simulator."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nats.js import api

from contracts.v1 import (
    Command,
    CommandEnvelope,
    CommandResult,
    EventEnvelope,
    MowerRegistration,
    SetBladeHeight,
    decode_event,
    decode_result,
)
from mowdeck.gateway.service import GatewayService
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import Bus
from simulator import FleetConfig, SimulatorServer
from tests.support.eventually import eventually, sentinel_through
from tests.support.openmower import broker, openmower  # noqa: F401 - test_openmower.py
from tests.support.settings import fast_path_from_environment

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000acc1")


def settings_for(url: str, mowers: list[MowerRegistration], **overrides: Any) -> GatewaySettings:
    """Gateway settings for a test: free HTTP port, fast Fleet retries.

    ``MOWDECK_NATS_FAST_PATH`` comes from the environment, as a service's would.
    """
    values: dict[str, Any] = {
        "nats_url": url,
        "nats_fast_path": fast_path_from_environment(),
        "http_port": 0,
        "bootstrap_mowers": mowers,
        "fleet_list_timeout_seconds": 0.2,
        "fleet_retry_initial_seconds": 0.05,
        "fleet_retry_max_seconds": 0.2,
        "device_command_timeout_seconds": 5.0,
        "shutdown_timeout_seconds": 15.0,
        "gateway_device_hosts": ["127.0.0.1"],  # the test simulators, on any port
    }
    values.update(overrides)
    return GatewaySettings(**values)


@pytest.fixture
async def sim() -> AsyncIterator[SimulatorServer]:
    """Four simulated mowers of ACCOUNT at 20x."""
    server = SimulatorServer(FleetConfig(mowers=4, seed=7, speed=20.0, account_id=ACCOUNT))
    await server.start()
    yield server
    await server.stop()


@asynccontextmanager
async def running_gateway(settings: GatewaySettings) -> AsyncIterator[GatewayService]:
    """A started gateway, stopped gracefully at the end."""
    gateway = GatewayService(settings)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


async def wait_connected(gateway: GatewayService, count: int) -> None:
    """Until ``count`` device links are up."""
    await eventually(lambda: sum(c.connected for c in gateway.connections.values()) >= count)


def command(
    mower: MowerRegistration,
    body: Command,
    *,
    ttl_s: float = 30,
    now: datetime | None = None,
    account: uuid.UUID | None = None,
) -> CommandEnvelope:
    """A fresh command for a registered mower."""
    return CommandEnvelope.issue(
        mower_id=mower.mower_id,
        account_id=account or mower.account_id,
        command=body,
        issued_by="user:test",
        now=now or datetime.now(UTC),
        ttl=timedelta(seconds=ttl_s),
    )


class ResultLog:
    """Every stored command result, read back from the COMMANDS stream."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.results: list[CommandResult] = []
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self.bus.js.subscribe(
            "command.result.mower.*",
            stream="COMMANDS",
            ordered_consumer=True,
            cb=self._on,
            deliver_policy=api.DeliverPolicy.ALL,
        )

    async def _on(self, msg: Any) -> None:
        self.results.append(decode_result(msg.data))

    def of(self, command_id: uuid.UUID) -> list[str]:
        return [r.status for r in self.results if r.command_id == command_id]

    def final(self, command_id: uuid.UUID) -> CommandResult | None:
        finals = [r for r in self.results if r.command_id == command_id and r.is_final]
        return finals[-1] if finals else None

    async def wait_final(self, command_id: uuid.UUID, timeout: float = 10.0) -> CommandResult:
        return await eventually(lambda: self.final(command_id), timeout)

    async def stop(self) -> None:
        await self._sub.unsubscribe()


async def sentinel_command(bus: Bus, results: ResultLog, mower: MowerRegistration) -> None:
    """Publish a sentinel command for ``mower`` and wait for its final result.

    The gateway's consumer reads the COMMANDS stream in order, and one mower's commands run
    in that order: whatever was published before the sentinel has been handled (and its
    results stored) by the time the sentinel's final result is in.
    """
    sentinel = command(mower, SetBladeHeight(height_mm=25))
    await sentinel_through(
        lambda: bus.publish_command(sentinel, now=datetime.now(UTC)),
        lambda: results.final(sentinel.command_id),
    )


@pytest.fixture
async def results(bus: Bus) -> AsyncIterator[ResultLog]:
    """The results stored in the stream during the test."""
    log = ResultLog(bus)
    await log.start()
    yield log
    await log.stop()


class EventLog:
    """Every stored mower event."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.events: list[EventEnvelope[Any]] = []
        self._sub: Any = None

    async def start(self) -> None:
        self._sub = await self.bus.js.subscribe(
            "event.mower.*",
            stream="EVENTS",
            ordered_consumer=True,
            cb=self._on,
        )

    async def _on(self, msg: Any) -> None:
        self.events.append(decode_event(msg.data))

    def types(self, mower_id: uuid.UUID) -> list[str]:
        return [e.type for e in self.events if getattr(e.payload, "mower_id", None) == mower_id]

    async def stop(self) -> None:
        await self._sub.unsubscribe()


@pytest.fixture
async def events(bus: Bus) -> AsyncIterator[EventLog]:
    """The mower events stored during the test."""
    log = EventLog(bus)
    await log.start()
    yield log
    await log.stop()
