"""What a device may send on its link before the gateway closes it (docs/gateway.md).

A device is not trusted: a broken or hostile one may send frames the protocol does not
know, frames far larger than any state, states of other mowers, or frames as fast as its
uplink allows. Each of these closes its link with a reason (logged and counted by kind in
``mowdeck_gateway_device_links_closed_total``), and the link is dialled again only after
the backoff has grown, as after a failed connect: one device cannot spin the shard's loop
or speak for another mower, and every other mower's link goes on as before.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import msgspec
from prometheus_client import CollectorRegistry, Counter

from mowdeck.errors import MowdeckError

__all__ = ["FrameBudget", "LinkLimits", "LinkViolation", "LinkViolations", "ViolationKind"]

ViolationKind = Literal["malformed_frame", "frame_too_large", "foreign_mower", "flood"]
KINDS: Final[tuple[ViolationKind, ...]] = (
    "malformed_frame",
    "frame_too_large",
    "foreign_mower",
    "flood",
)


class LinkLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits of one device link; the gateway's settings, never a registration's.

    A state frame is about 1 KB; a simulated mower at 60x reports about 120 frames a
    second at most, so the defaults leave a real device (and a fast simulation) far room.
    """

    max_frame_bytes: Annotated[int, msgspec.Meta(ge=1024, le=16 << 20)] = 64 << 10
    frames_per_second: Annotated[float, msgspec.Meta(gt=0)] = 200.0
    frame_burst: Annotated[int, msgspec.Meta(ge=1)] = 1000


class LinkViolation(MowdeckError):
    """The device broke a rule of its link: the link is closed with this reason."""

    def __init__(self, kind: ViolationKind, detail: str) -> None:
        super().__init__(f"{kind.replace('_', ' ')}: {detail}")
        self.kind = kind
        self.reason = f"protocol violation: {kind.replace('_', ' ')}: {detail}"


class FrameBudget:
    """A token bucket of frames for one link; ``take(now)`` is False once it is spent."""

    __slots__ = ("_at", "_burst", "_rate", "_tokens")

    def __init__(self, limits: LinkLimits, now: float) -> None:
        self._rate = limits.frames_per_second
        self._burst = float(limits.frame_burst)
        self._tokens = self._burst
        self._at = now

    def take(self, now: float) -> bool:
        """Spend one frame; False when the link sent more than its rate and burst allow."""
        tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if tokens < 1.0:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1.0
        return True


class LinkViolations:
    """Counts the links closed for a violation, by kind, in the gateway's registry."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.closed = Counter(
            "mowdeck_gateway_device_links_closed_total",
            "Device links the gateway closed because the device broke a rule of its link"
            " (malformed_frame, frame_too_large, foreign_mower, flood).",
            ["reason"],
            registry=registry,
        )
        for kind in KINDS:
            self.closed.labels(reason=kind)

    def count(self, violation: LinkViolation) -> None:
        """One more link closed for ``violation``."""
        self.closed.labels(reason=violation.kind).inc()
