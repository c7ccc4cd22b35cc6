"""Stream snapshots through the JetStream API: messages and consumer positions come back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.js import api

from mowdeck.kit.bus import Bus
from mowdeck.kit.snapshots import SnapshotError, restore_stream, snapshot_stream
from tests.support.natsserver import NatsServer


@pytest.fixture
def other_server() -> Iterator[NatsServer]:
    """A second, empty NATS server to restore into."""
    server = NatsServer()
    server.start()
    yield server
    server.close()


async def test_a_snapshot_restores_messages_and_consumer_positions(
    bus: Bus, other_server: NatsServer, tmp_path: Path
) -> None:
    for i in range(300):
        await bus.js.publish(f"telemetry.mower.{i % 7}", b"x" * (i % 50 + 1))
    await bus.js.add_consumer(
        "TELEMETRY", api.ConsumerConfig(durable_name="reader", ack_policy=api.AckPolicy.EXPLICIT)
    )
    reader = await bus.js.pull_subscribe_bind("reader", stream="TELEMETRY")
    for msg in await reader.fetch(40):
        await msg.ack()
    taken = await snapshot_stream(bus.nc, "TELEMETRY", tmp_path)
    assert taken["messages"] == 300

    other = await Bus.connect(other_server.url, name="restore")
    try:
        restored = await restore_stream(other.nc, "TELEMETRY", tmp_path)
        assert (restored["messages"], restored["last_seq"]) == (300, taken["last_seq"])
        consumer = await other.js.consumer_info("TELEMETRY", "reader")
        assert consumer.ack_floor.stream_seq == 40
        assert consumer.num_pending == 260
        # A stream that exists is never overwritten: the server's reason is the error.
        with pytest.raises(SnapshotError, match="restore of TELEMETRY"):
            await restore_stream(other.nc, "TELEMETRY", tmp_path)
    finally:
        await other.drain()


async def test_a_snapshot_of_a_stream_that_does_not_exist_names_it(
    bus: Bus, tmp_path: Path
) -> None:
    with pytest.raises(SnapshotError, match="snapshot of NOPE"):
        await snapshot_stream(bus.nc, "NOPE", tmp_path)
