"""The Device-Gateway's composition root: one shard of ADR 0013.

``start()`` connects the bus (given or owned, ``kit/compose.py``), builds the parts
(``parts.build``), starts them in the order of ``parts.steps`` and listens; ``stop()``
shuts down in ADR 0013's order, then releases the rest in reverse.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import structlog
from prometheus_client import CollectorRegistry

from actors import ActorMetrics
from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.gateway.connections import ConnectionAdapters, MowerConnection
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mowers import ShardMowers
from mowdeck.gateway.parts import Parts, build, steps
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.gateway.shard import Shard
from mowdeck.kit.bus import Bus
from mowdeck.kit.compose import Given, Needs
from mowdeck.kit.http import service_app
from mowdeck.kit.shell import ServiceShell

__all__ = ["GatewayService"]

log = structlog.get_logger("mowdeck.gateway")


class GatewayService(ServiceShell[GatewaySettings, Parts]):
    """One gateway shard: registry, controllers, device links, command consumer."""

    name = "gateway"

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        bus: Bus | None = None,
        metrics_registry: CollectorRegistry | None = None,
        connections: ConnectionAdapters | None = None,
        kinds: ConnectionKinds | None = None,
        on_seeded: Callable[[], object] | None = None,
    ) -> None:
        """``on_seeded()`` is called once the shard's mowers are seeded from Fleet (the
        process's command freezes what lives from then on; a test process that builds and
        drops gateways passes nothing)."""
        super().__init__(settings, metrics_registry)
        self._given = Given(bus=bus)
        adapters = connections or ConnectionAdapters.from_entry_points()
        kinds = kinds or ConnectionKinds.from_entry_points()
        adapters.check_declared(kinds)
        self.shard = Shard(
            ShardMowers(settings.shard_index, settings.shard_count),
            {},
            GatewayMetrics(self.metrics_registry),
            ActorMetrics(self.metrics_registry),
            adapters,
            kinds,
        )
        self._on_seeded = on_seeded
        self._stopped = False

    @property
    def mowers(self) -> ShardMowers:
        """The shard's mowers."""
        return self.shard.mowers

    @property
    def connections(self) -> dict[uuid.UUID, MowerConnection]:
        """The device links, by mower."""
        return self.shard.connections

    @property
    def metrics(self) -> GatewayMetrics:
        """The shard's metrics."""
        return self.shard.metrics

    def tell(self, mower_id: uuid.UUID, message: object) -> None:
        """Send a message to a mower's controller, if it has one (call on the loop)."""
        self.parts.router.tell(mower_id, message)

    async def _start(self) -> None:
        s = self.settings
        needs = Needs("gateway", name=self.shard.producer, authz=False, verifier=None)
        base = await self._open(self._given, needs)
        parts = build(s, base, self.shard, on_seeded=self._on_seeded)
        await self._start_parts(parts, steps(parts, s))
        await self._listen(service_app("gateway", self.readiness, self.metrics_registry))
        log.info(
            "gateway started", shard=s.shard_index, shards=s.shard_count, mowers=len(self.mowers)
        )

    async def stop(self) -> None:
        """Graceful shutdown in ADR 0013's order, then release what was started."""
        if self._stopped:
            return
        self._stopped = True
        self.readiness.set_not_ready("shutting down")
        if self._parts is not None:
            await self._shut_down(self._parts)
        # Then, in reverse: heartbeats, seed, links, controllers, publisher, workers, bus.
        await self._resources.close()
        log.info("gateway stopped", shard=self.settings.shard_index)

    async def _shut_down(self, parts: Parts) -> None:
        # Each step in turn, of the parts whose start ran (a start may have failed half-way).
        ran, timeout = self._started.__contains__, self.settings.shutdown_timeout_seconds
        intake, effects, closing, held = parts.intake, parts.effects, parts.closing, parts.held
        intake.closing = True
        if ran("commands consumer"):  # deliveries arriving from now on are given back
            await parts.consumer.stop()
        if ran("admission"):  # so are the ordinary commands not admitted yet
            await intake.release()
        if ran("controllers"):  # every controller decides what it was told
            await closing.barrier(self.mowers)
        if ran("results publisher") and not await effects.pending.wait_empty(timeout):
            log.error("shutdown timed out waiting for results", pending=len(effects.pending))
        # Every delivery whose result is stored is acknowledged before the bus drains.
        if ran("command acks") and not await held.wait_empty(5.0):
            log.error("shutdown left deliveries unacknowledged", held=len(held))
        # The lane keeps sending stops until here, while what was admitted still runs.
        intake.stops_closed = True
        if ran("emergency lane"):
            await parts.lane.stop()
        if ran("controllers"):  # ending drive sessions, publishing mower.disconnected
            await closing.close_all(self.mowers, "gateway shutting down")
        if ran("results publisher"):
            await effects.settle(timeout=5.0)
        if ran("admission"):
            await intake.stop()
