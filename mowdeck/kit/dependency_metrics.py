"""What a service sees of the servers it depends on, as Prometheus metrics.

Every service exposes, on its own registry (``Resources.bus_for`` and ``Resources.pool``
start it), whether it reaches NATS and PostgreSQL, how full the JetStream streams its bus
user needs are, and how far behind each durable consumer it runs is:

- ``mowdeck_dependency_up{dependency="nats"|"postgresql"}``: 1 while the bus is connected
  (read at the scrape) and while the last ``SELECT 1`` on the service's pool answered
  within ``PROBE_TIMEOUT_S`` (read every round);
- ``mowdeck_stream_messages``, ``mowdeck_stream_bytes`` and, for a stream with such a
  limit, ``mowdeck_stream_max_messages`` and ``mowdeck_stream_max_bytes`` (by ``stream``);
- ``mowdeck_jetstream_storage_bytes`` (file storage the bus's account uses) and, when the
  account has such a limit, ``mowdeck_jetstream_max_storage_bytes``;
- ``mowdeck_consumer_pending_messages`` (in the stream, not delivered yet),
  ``mowdeck_consumer_ack_pending_messages`` (delivered, not acknowledged) and
  ``mowdeck_consumer_delivered_sequence`` (the last stream sequence delivered: it stands
  still when the consumer takes nothing), by ``stream`` and ``consumer`` (the durable's
  name: a fixed set per service).

The streams and consumers are read every ``every`` seconds in a task of their own, never
at the scrape; a figure that could not be read in the last round is left out rather than
shown stale. On a bus shared by several services (the demo on a configured NATS server)
each lists the consumers of every service on that bus.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import Any

import asyncpg
import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from mowdeck.kit.bus import Bus
from mowdeck.kit.periodic import Periodic

__all__ = ["PROBE_TIMEOUT_S", "DependencyMetrics"]

log = structlog.get_logger("mowdeck.dependencies")

# A probe (a stream's or consumer's info, PostgreSQL's SELECT 1) slower than this counts as
# not answered.
PROBE_TIMEOUT_S = 5.0


class DependencyMetrics(Collector):
    """NATS, PostgreSQL, stream and consumer figures of one service, on ``registry``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        bus: Bus,
        streams: Iterable[str],
        *,
        every: float = 5.0,
    ) -> None:
        self._bus = bus
        self._streams = tuple(streams)
        self._pool: asyncpg.Pool | None = None
        self._postgres_up = 0.0
        self._stream_figures: dict[str, tuple[int, int, int, int]] = {}
        self._storage: tuple[int, int] | None = None
        self._consumer_figures: dict[tuple[str, str], tuple[int, int, int]] = {}
        self._rounds = Periodic("dependency-metrics", every, self.read)
        registry.register(self)

    def watch_pool(self, pool: asyncpg.Pool) -> None:
        """Probe ``pool`` too (``mowdeck_dependency_up{dependency="postgresql"}``)."""
        self._pool = pool

    def start(self) -> None:
        """Read now, then every ``every`` seconds."""
        self._rounds.start()
        self._rounds.wake()

    async def stop(self) -> None:
        """Stop reading."""
        await self._rounds.stop()

    async def read(self) -> None:
        """One round: every stream, every consumer of the bus, the pool."""
        if self._pool is not None:
            self._postgres_up = 1.0 if await self._probe(_select_one(self._pool), "pg") else 0.0
        if not self._bus.connected:
            # Nothing to ask while disconnected: each request would wait out its timeout.
            self._stream_figures, self._consumer_figures, self._storage = {}, {}, None
            return
        streams: dict[str, tuple[int, int, int, int]] = {}
        for name in self._streams:
            info = await self._probe(self._bus.js.stream_info(name), what=f"stream {name}")
            if info is not None:
                state, config = info.state, info.config
                streams[name] = (
                    int(state.messages or 0),
                    int(state.bytes or 0),
                    int(config.max_msgs or -1),
                    int(config.max_bytes or -1),
                )
        self._stream_figures = streams
        account = await self._probe(self._bus.js.account_info(), what="account")
        self._storage = (
            None
            if account is None
            else (int(account.storage or 0), int(account.limits.max_storage or -1))
        )
        consumers: dict[tuple[str, str], tuple[int, int, int]] = {}
        for stream, durable in sorted(self._bus.durables):
            info = await self._probe(
                self._bus.js.consumer_info(stream, durable), what=f"consumer {durable}"
            )
            if info is not None:
                consumers[stream, durable] = (
                    int(info.num_pending or 0),
                    int(info.num_ack_pending or 0),
                    int(info.delivered.stream_seq or 0) if info.delivered else 0,
                )
        self._consumer_figures = consumers

    @staticmethod
    async def _probe(call: Any, what: str) -> Any:
        try:
            return await asyncio.wait_for(call, PROBE_TIMEOUT_S)
        except Exception as err:
            log.debug("dependency not read", what=what, error=repr(err))
            return None

    def describe(self) -> Iterator[Metric]:
        return iter(())  # figures appear once read: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "mowdeck_dependency_up",
            "1 while the service reaches the dependency (NATS: connected; PostgreSQL: the"
            f" last SELECT 1 answered within {PROBE_TIMEOUT_S:g} s), else 0.",
            labels=["dependency"],
        )
        up.add_metric(["nats"], 1.0 if self._bus.connected else 0.0)
        if self._pool is not None:
            up.add_metric(["postgresql"], self._postgres_up)
        yield up
        families = {
            name: GaugeMetricFamily(name, doc, labels=["stream"])
            for name, doc in (
                ("mowdeck_stream_messages", "Messages in the JetStream stream."),
                ("mowdeck_stream_bytes", "Bytes in the JetStream stream."),
                ("mowdeck_stream_max_messages", "The stream's message limit (when it has one)."),
                ("mowdeck_stream_max_bytes", "The stream's byte limit (when it has one)."),
            )
        }
        for stream, (messages, size, max_messages, max_bytes) in self._stream_figures.items():
            families["mowdeck_stream_messages"].add_metric([stream], messages)
            families["mowdeck_stream_bytes"].add_metric([stream], size)
            if max_messages > 0:
                families["mowdeck_stream_max_messages"].add_metric([stream], max_messages)
            if max_bytes > 0:
                families["mowdeck_stream_max_bytes"].add_metric([stream], max_bytes)
        yield from families.values()
        used = GaugeMetricFamily(
            "mowdeck_jetstream_storage_bytes", "File storage the bus's JetStream account uses."
        )
        limit = GaugeMetricFamily(
            "mowdeck_jetstream_max_storage_bytes",
            "The JetStream account's file storage limit (when it has one).",
        )
        if self._storage is not None:
            used.add_metric([], self._storage[0])
            if self._storage[1] > 0:
                limit.add_metric([], self._storage[1])
        yield used
        yield limit
        consumer_families = [
            GaugeMetricFamily(name, doc, labels=["stream", "consumer"])
            for name, doc in (
                (
                    "mowdeck_consumer_pending_messages",
                    "Messages of the durable consumer's filter in the stream, not delivered yet.",
                ),
                (
                    "mowdeck_consumer_ack_pending_messages",
                    "Messages delivered to the durable consumer and not acknowledged yet.",
                ),
                (
                    "mowdeck_consumer_delivered_sequence",
                    "The stream sequence last delivered to the durable consumer.",
                ),
            )
        ]
        for (stream, durable), figures in self._consumer_figures.items():
            for family, value in zip(consumer_families, figures, strict=True):
                family.add_metric([stream, durable], value)
        yield from consumer_families


async def _select_one(pool: asyncpg.Pool) -> bool:
    async with pool.acquire() as conn:
        return bool(await conn.fetchval("SELECT 1") == 1)
