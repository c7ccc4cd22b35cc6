"""What a gateway shard holds from its construction on, before and after its start."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from actors import ActorMetrics
from mowdeck.devices.kinds import ConnectionKinds
from mowdeck.gateway.connections import ConnectionAdapters, MowerConnection
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mowers import ShardMowers

__all__ = ["Shard"]


@dataclass(frozen=True, slots=True)
class Shard:
    """What a shard holds from its construction on: its mowers and their device links,
    the metrics, the adapters and kinds of connection it speaks."""

    mowers: ShardMowers
    connections: dict[uuid.UUID, MowerConnection]
    metrics: GatewayMetrics
    actor_metrics: ActorMetrics
    adapters: ConnectionAdapters
    kinds: ConnectionKinds

    @property
    def producer(self) -> str:
        """The name the shard's publishes and connections go by."""
        return f"gateway-{self.mowers.shard_index}"

    @property
    def durable(self) -> str:
        """The shard's durable consumer of the commands."""
        return f"device-gateway-{self.mowers.shard_index}"
