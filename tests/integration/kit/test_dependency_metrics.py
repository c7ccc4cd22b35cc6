"""What a service shows of NATS, PostgreSQL, its streams and its consumers, on real servers."""

from __future__ import annotations

import contextlib

import asyncpg
import pytest
from nats.js import api
from prometheus_client import CollectorRegistry, generate_latest

from contracts.v1.subjects import COMMANDS, EVENTS
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from mowdeck.kit.dependency_metrics import DependencyMetrics
from tests.support.eventually import eventually
from tests.support.jetstream import recreate_streams
from tests.support.natsserver import NatsServer
from tests.support.settings import fast_path_from_environment

pytestmark = pytest.mark.timeout(60)


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


async def _noop(msg: object) -> None:
    return None


async def test_streams_consumers_and_the_servers_as_the_service_sees_them(
    own_nats_server: NatsServer, database_url: str
) -> None:
    bus = await Bus.connect(own_nats_server.url, name="t", fast_path=fast_path_from_environment())
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=2)
    registry = CollectorRegistry()
    watch = DependencyMetrics(registry, bus, [COMMANDS.name, EVENTS.name], every=0.2)
    watch.watch_pool(pool)
    try:
        await recreate_streams(bus)
        # A durable consumer with three commands waiting: it has taken none yet.
        spec = ConsumerSpec(
            stream=EVENTS.name,
            subject="event.mower.>",
            durable="test-events",
            deliver_policy=api.DeliverPolicy.ALL,
            deliver_subject="test.events.deliveries",
        )
        for i in range(3):
            await bus.js.publish(f"event.mower.m{i}", b"{}")
        await bus.js.add_consumer(EVENTS.name, config=spec.config())
        bus.durables.add((EVENTS.name, "test-events"))
        watch.start()
        labels = {"stream": EVENTS.name, "consumer": "test-events"}
        await eventually(
            lambda: _value(registry, "mowdeck_consumer_pending_messages", **labels) == 3
        )
        assert _value(registry, "mowdeck_dependency_up", dependency="nats") == 1
        assert _value(registry, "mowdeck_dependency_up", dependency="postgresql") == 1
        assert _value(registry, "mowdeck_stream_messages", stream=EVENTS.name) == 3
        assert (_value(registry, "mowdeck_stream_bytes", stream=EVENTS.name) or 0) > 0
        # The contracts' streams have an age limit only: no size limit is shown.
        assert _value(registry, "mowdeck_stream_max_bytes", stream=EVENTS.name) is None
        assert (_value(registry, "mowdeck_jetstream_storage_bytes") or 0) > 0

        # Once consumed: nothing pending, the delivered sequence moved on.
        consumer = Consumer(bus, spec, _noop)
        await consumer.start()
        try:
            await eventually(
                lambda: _value(registry, "mowdeck_consumer_delivered_sequence", **labels) == 3
            )
            assert _value(registry, "mowdeck_consumer_pending_messages", **labels) == 0
        finally:
            await consumer.stop()

        # NATS gone: the bus says so at once; the stream's figures, unread, are left out.
        own_nats_server.stop()
        await eventually(lambda: _value(registry, "mowdeck_dependency_up", dependency="nats") == 0)
        await eventually(
            lambda: _value(registry, "mowdeck_stream_messages", stream=EVENTS.name) is None,
        )
        # PostgreSQL gone (the pool closed under the probe): 0.
        await pool.close()
        await eventually(
            lambda: _value(registry, "mowdeck_dependency_up", dependency="postgresql") == 0
        )
        text = generate_latest(registry).decode()
        assert 'mowdeck_dependency_up{dependency="nats"} 0.0' in text
    finally:
        await watch.stop()
        if not pool._closed:
            await pool.close()
        with contextlib.suppress(Exception):  # the server is gone
            await bus.nc.close()
