"""Gateway settings: ``MOWDECK_*`` variables (ADR 0013)."""

from __future__ import annotations

from typing import Annotated

import msgspec

from contracts.v1 import MowerRegistration
from mowdeck.devices.automower import (
    DEFAULT_API_URL,
    DEFAULT_TOKEN_URL,
    DEFAULT_WS_URL,
    AutomowerEndpoints,
)
from mowdeck.devices.endpoints import DEVELOPMENT_DEVICE_HOSTS, DeviceHosts
from mowdeck.gateway.connections.link_limits import LinkLimits
from mowdeck.kit.settings import BaseSettings

__all__ = ["GatewaySettings"]

Positive = Annotated[float, msgspec.Meta(gt=0)]


class GatewaySettings(BaseSettings, frozen=True, kw_only=True):
    """Everything ``mowdeck gateway`` reads."""

    shard_index: Annotated[int, msgspec.Meta(ge=0)] = 0
    shard_count: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 1
    # Development only: seeds the shard's mowers until Fleet answers (ADR 0013).
    bootstrap_mowers: list[MowerRegistration] = msgspec.field(default_factory=list)
    # How often each mower's last state is published again (a heartbeat). The variable is
    # MOWDECK_TELEMETRY_HEARTBEAT_SECONDS, as ADR 0013 names it.
    state_heartbeat_seconds: Positive = msgspec.field(
        default=10.0, name="telemetry_heartbeat_seconds"
    )
    device_command_timeout_seconds: Positive = 10.0
    dispatcher_workers: Annotated[int, msgspec.Meta(ge=1, le=64)] = 2
    fleet_list_timeout_seconds: Positive = 2.0
    fleet_retry_initial_seconds: Positive = 1.0
    fleet_retry_max_seconds: Positive = 30.0
    command_ack_wait_seconds: Positive = 30.0
    # Ordinary commands a shard holds admitted and unanswered; beyond, they wait in the
    # stream (the durable's max_ack_pending). At saturation a held command waits about
    # this many divided by the rate inside the shard; sized by measurement in
    # docs/gateway.md, amendment 1 (raise it for devices that answer slowly).
    gateway_max_in_flight: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 192
    # Hosts device connections may dial (host, host:port, *.domain, CIDR); see
    # docs/gateway.md. The default is the simulator's own address, for development.
    gateway_device_hosts: list[str] = msgspec.field(
        default_factory=lambda: list(DEVELOPMENT_DEVICE_HOSTS)
    )
    # Where device links read the credentials connections name (``<name>.json``); unset:
    # a connection that names one stays down with that reason. See docs/gateway.md.
    gateway_credentials_dir: str | None = None
    # The Automower Connect cloud (connection kind automower): OAuth2 token endpoint, REST
    # base (ending /v1) and WebSocket; their hosts must be in MOWDECK_GATEWAY_DEVICE_HOSTS.
    automower_token_url: str = DEFAULT_TOKEN_URL
    automower_api_url: str = DEFAULT_API_URL
    automower_ws_url: str = DEFAULT_WS_URL
    # SCHED_FIFO priority of the emergency lane's thread (0: ordinary scheduling); it
    # needs CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least this. See docs/gateway.md.
    gateway_lane_realtime_priority: Annotated[int, msgspec.Meta(ge=0, le=99)] = 10
    # What a device may send on its link before it is closed (docs/gateway.md, "A
    # device that misbehaves"): the largest frame, and frames per second with a burst.
    gateway_device_max_frame_bytes: Annotated[int, msgspec.Meta(ge=1024, le=16 << 20)] = 64 << 10
    gateway_device_frames_per_second: Positive = 200.0
    gateway_device_frame_burst: Annotated[int, msgspec.Meta(ge=1)] = 1000
    # Allocations between young collections (0 keeps Python's 700); see docs/gateway.md.
    gateway_gc_young_threshold: Annotated[int, msgspec.Meta(ge=0)] = 20_000

    def __post_init__(self) -> None:
        DeviceHosts(self.gateway_device_hosts)  # a pattern that is not one fails at start
        self.automower_endpoints()  # so does an Automower URL that is not one
        if self.shard_index >= self.shard_count:
            raise ValueError(
                "MOWDECK_SHARD_INDEX must be less than MOWDECK_SHARD_COUNT "
                f"(got {self.shard_index} of {self.shard_count})"
            )

    def device_hosts(self) -> DeviceHosts:
        """The parsed ``MOWDECK_GATEWAY_DEVICE_HOSTS``."""
        return DeviceHosts(self.gateway_device_hosts)

    def link_limits(self) -> LinkLimits:
        """The ``MOWDECK_GATEWAY_DEVICE_*`` limits of every device link."""
        return LinkLimits(
            max_frame_bytes=self.gateway_device_max_frame_bytes,
            frames_per_second=self.gateway_device_frames_per_second,
            frame_burst=self.gateway_device_frame_burst,
        )

    def automower_endpoints(self) -> AutomowerEndpoints:
        """The ``MOWDECK_AUTOMOWER_*`` endpoints."""
        return AutomowerEndpoints(
            token_url=self.automower_token_url,
            api_url=self.automower_api_url,
            ws_url=self.automower_ws_url,
        )
