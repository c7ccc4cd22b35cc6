"""The two ways commands reach the intake: the shard's durable consumer and the emergency lane."""

from __future__ import annotations

from nats.js import api

from contracts.v1.subjects import COMMAND_FILTER, COMMANDS, EMERGENCY_FILTER
from mowdeck.gateway.intake import EMERGENCY_MARKER, CommandIntake
from mowdeck.gateway.lane import EmergencyLane
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.consumer import Consumer, ConsumerSpec

__all__ = ["command_consumer", "emergency_lane"]


def command_consumer(
    bus: Bus, settings: GatewaySettings, intake: CommandIntake, *, durable: str
) -> Consumer:
    """The shard's durable consumer ``durable`` of every command, handing them to ``intake``."""
    spec = ConsumerSpec(
        stream=COMMANDS.name,
        subject=COMMAND_FILTER,
        durable=durable,
        ack_wait=settings.command_ack_wait_seconds,
        # Deliveries are acknowledged once their final result is stored: this bounds the
        # commands the shard holds admitted and unanswered; the rest wait in the stream.
        max_ack_pending=settings.gateway_max_in_flight,
        # A shard's consumer created now (a first deployment, a new index after
        # MOWDECK_SHARD_COUNT grew) starts at the stream's end: replaying the stream's day
        # of commands would answer commands other instances answered and run again those
        # not yet expired. An existing durable keeps its place.
        deliver_policy=api.DeliverPolicy.NEW,
    )
    # The intake settles what arrives while closing: it acks the stream copy of a stop the
    # emergency lane already sent, which the next owner would send again.
    return Consumer(bus, spec, intake.on_command, settles_while_closing=True)


def emergency_lane(settings: GatewaySettings, intake: CommandIntake, *, name: str) -> EmergencyLane:
    """A thread and a connection of its own that see every stop as it is published.

    It reads the stops' announcements (``emergency.mower.*``, amendment 2 to ADR 0013). A
    stop found there is neither queued behind the stream's backlog nor behind a busy turn
    of the main loop (docs/gateway.md, "The emergency lane").
    """
    return EmergencyLane(
        settings.nats_url,
        name=name,
        subject=EMERGENCY_FILTER,
        handle=intake.on_lane_message,
        marker=EMERGENCY_MARKER,
        fast_path=settings.nats_fast_path,
        credentials=NatsCredentials.from_settings(settings),
        realtime_priority=settings.gateway_lane_realtime_priority,
    )
