"""``mowdeck streams`` creates the contract's streams and leaves an operator's settings alone."""

from __future__ import annotations

import asyncio

import pytest
from nats.js import api

from contracts.v1.subjects import STREAMS
from mowdeck.cli import main
from mowdeck.commands import streams as streams_command
from mowdeck.kit.bus import Bus
from tests.support.natsserver import NatsServer, free_port


async def _lengthen_telemetry(url: str, max_age: float) -> api.StreamConfig:
    bus = await Bus.connect(url, name="operator")
    try:
        cfg = (await bus.js.stream_info("TELEMETRY")).config
        cfg.max_age = max_age
        return (await bus.js.update_stream(cfg)).config
    finally:
        await bus.drain()


async def _telemetry(url: str) -> api.StreamConfig:
    bus = await Bus.connect(url, name="reader")
    try:
        return (await bus.js.stream_info("TELEMETRY")).config
    finally:
        await bus.drain()


def test_streams_are_created_then_merged(
    own_nats_server: NatsServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MOWDECK_NATS_URL", own_nats_server.url)
    assert main(["streams"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        *(f"{s.name}: created" for s in STREAMS),
        "KV_MOWDECK_DENYLIST: created",
        "KV_realtime-tickets: created",
    ]

    asyncio.run(_lengthen_telemetry(own_nats_server.url, 6 * 3600.0))
    assert main(["streams", "--replicas", "3"]) == 0
    out = capsys.readouterr().out
    assert "TELEMETRY: unchanged\n  left alone: max_age 21600 (contracts: 3600)\n" in out
    assert "  left alone: replicas 1 (configured here: 3)" in out
    after = asyncio.run(_telemetry(own_nats_server.url))
    assert (after.max_age, after.num_replicas) == (6 * 3600, 1)


def test_an_unreachable_nats_is_an_error_not_a_wait(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(streams_command, "CONNECT_TIMEOUT_SECONDS", 1.0)
    monkeypatch.setenv("MOWDECK_NATS_URL", f"nats://127.0.0.1:{free_port()}")
    assert main(["streams"]) == 2
    assert "cannot reach NATS" in capsys.readouterr().err
