"""The simulator's clock: simulated seconds run ``speed`` times faster than the wall."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["SimClock"]


class SimClock:
    """Simulated seconds since start, ``speed`` times the monotonic wall clock."""

    def __init__(self, speed: float = 1.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._monotonic = monotonic
        self._origin = monotonic()

    def now(self) -> float:
        """Simulated seconds since the clock was made."""
        return (self._monotonic() - self._origin) * self.speed

    def wall(self) -> float:
        """Monotonic wall-clock seconds (for link faults, which are real time)."""
        return self._monotonic()
