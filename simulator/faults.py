"""Fault injection requests (``POST /sim/mowers/{id}/faults``) and a mower's fault flags."""

from __future__ import annotations

from typing import Annotated

import msgspec

from mowdeck.kit.http import decode_as_json_schema

__all__ = [
    "BatteryFault",
    "ErrorFault",
    "EscapeFault",
    "Fault",
    "FaultError",
    "LatencyFault",
    "LinkLossFault",
    "RejectFault",
    "SilenceFault",
    "StuckFault",
    "TheftFault",
    "TransportFaults",
    "decode_fault",
]

Seconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]


class FaultError(ValueError):
    """A fault request that cannot be applied, with the reason."""


class _FaultBase(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind"):
    """One kind of fault; the ``kind`` tag selects the type."""


class StuckFault(_FaultBase, frozen=True, tag="stuck"):
    """Wheels spin but the mower does not move; it errors with ``stuck`` after a while."""


class ErrorFault(_FaultBase, frozen=True, tag="error"):
    """The mower stops with an error code (``lifted``, ``outside_area``, ...)."""

    code: Annotated[str, msgspec.Meta(min_length=1, max_length=100)] = "lifted"


class LinkLossFault(_FaultBase, frozen=True, tag="link_loss"):
    """The link drops and reconnects are refused for ``seconds`` (wall clock)."""

    seconds: Seconds


class SilenceFault(_FaultBase, frozen=True, tag="silence"):
    """No states for ``seconds`` (wall clock) while the link stays up."""

    seconds: Seconds


class LatencyFault(_FaultBase, frozen=True, tag="latency"):
    """Every ordinary command is handled ``ms`` later; an emergency stop is not delayed."""

    ms: Annotated[int, msgspec.Meta(ge=0, le=600_000)]


class RejectFault(_FaultBase, frozen=True, tag="reject"):
    """Every command, the emergency stop too, is answered ``failed``."""


class BatteryFault(_FaultBase, frozen=True, tag="battery"):
    """The battery level jumps to ``level`` percent."""

    level: Annotated[float, msgspec.Meta(ge=0, le=100)]


class EscapeFault(_FaultBase, frozen=True, tag="escape"):
    """The mower drives straight out of its area, mowing, away from the lawn's centre."""


class TheftFault(_FaultBase, frozen=True, tag="theft"):
    """The mower is lifted (error ``lifted``, blades stopped) and carried away at
    ``speed_mps``, straight away from the lawn's centre."""

    speed_mps: Annotated[float, msgspec.Meta(gt=0, le=60)] = 8.0


Fault = (
    StuckFault
    | ErrorFault
    | LinkLossFault
    | SilenceFault
    | LatencyFault
    | RejectFault
    | BatteryFault
    | EscapeFault
    | TheftFault
)


def decode_fault(data: bytes | str) -> Fault:
    """Decode a fault request, or raise ``FaultError`` with a reason."""
    try:
        fault: Fault = decode_as_json_schema(data, Fault)  # type: ignore[arg-type]
    except msgspec.DecodeError as err:
        raise FaultError(str(err)) from err
    return fault


class TransportFaults(msgspec.Struct, kw_only=True):
    """Faults of the link rather than the body; deadlines are wall-clock monotonic seconds."""

    link_down_until: float = 0.0
    silent_until: float = 0.0
    latency_ms: int = 0
    reject: bool = False

    def active(self, wall: float) -> dict[str, object]:
        """The transport faults in force at ``wall``, for introspection."""
        out: dict[str, object] = {}
        if self.link_down_until > wall:
            out["link_loss"] = {"remaining_s": round(self.link_down_until - wall, 3)}
        if self.silent_until > wall:
            out["silence"] = {"remaining_s": round(self.silent_until - wall, 3)}
        if self.latency_ms:
            out["latency"] = {"ms": self.latency_ms}
        if self.reject:
            out["reject"] = {}
        return out
