"""What grew during a soak, after its warm-up, and whether that is allowed (pure)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["GATED", "Bound", "Growth", "growths", "series", "violations"]

# The median of this many samples at each end: one sample may catch a burst of requests.
WINDOW = 3


@dataclass(frozen=True)
class Bound:
    """The most a measure may grow after the warm-up: ``relative`` of it, or ``absolute``."""

    relative: float
    absolute: float

    def allows(self, start: float, end: float) -> bool:
        """Whether growing from ``start`` to ``end`` stays within the bound."""
        return end - start <= max(self.relative * start, self.absolute)


# What the CI version gates on: open files, asyncio tasks and threads of the services'
# process and of nats-server. PostgreSQL's backends come and go with the pools, so they
# are reported, not gated. The absolute slack covers what one sample catches in flight
# (a few requests, one connection being replaced), not a leak of one per command.
GATED: Mapping[str, Bound] = {
    "demo.open_files": Bound(0.10, 4),
    "demo.threads": Bound(0.10, 2),
    "demo.tasks": Bound(0.10, 8),
    "nats-server.open_files": Bound(0.10, 4),
    "nats-server.threads": Bound(0.10, 2),
}


@dataclass(frozen=True)
class Growth:
    """One measure at the end of the warm-up and at the end of the run."""

    name: str
    start: float
    end: float

    @property
    def percent(self) -> float:
        """The growth in per cent of the start (0 when the start is 0 and nothing came)."""
        if self.start == 0:
            return 0.0 if self.end == 0 else float("inf")
        return 100.0 * (self.end - self.start) / self.start


def series(samples: Iterable[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Every measure of the samples as a flat name: ``demo.rss_mb``, ``table.X.rows``..."""
    out: dict[str, list[float]] = {}

    def put(name: str, value: float) -> None:
        out.setdefault(name, []).append(float(value))

    for s in samples:
        put("demo.tasks", s["tasks"])
        put("demo.python_threads", s["python_threads"])
        for key, value in s.get("heap", {}).items():
            put(f"demo.heap.{key}", value)
        if "relation_files" in s:
            put("postgres.relation_files", s["relation_files"])
        if "simulator_commands" in s:
            put("simulator.remembered_commands", s["simulator_commands"])
        for proc, values in s["processes"].items():
            for key in ("rss_mb", "open_files", "threads", "processes", "cpu_s"):
                put(f"{proc}.{key}", values[key])
        for stream, values in s["streams"].items():
            put(f"stream.{stream}.messages", values["messages"])
            put(f"stream.{stream}.bytes", values["bytes"])
        for table, values in s["tables"].items():
            put(f"table.{table}.rows", values["rows"])
            put(f"table.{table}.bytes", values["bytes"])
    return out


def growths(
    samples: list[Mapping[str, Any]], warmup_s: float, window: int = WINDOW
) -> dict[str, Growth]:
    """Each measure's median over the first samples after the warm-up and the last ones."""
    warm = [s for s in samples if s["t"] >= warmup_s]
    if len(warm) < 2 * window:
        raise ValueError(f"{len(warm)} samples after the warm-up: at least {2 * window} needed")
    first, last = series(warm[:window]), series(warm[-window:])
    return {
        name: Growth(name, statistics.median(first[name]), statistics.median(values))
        for name, values in last.items()
        if name in first
    }


def violations(found: Mapping[str, Growth], bounds: Mapping[str, Bound] = GATED) -> list[str]:
    """The gated measures that grew past their bound, or are missing, as sentences."""
    out = []
    for name, bound in bounds.items():
        g = found.get(name)
        if g is None:
            out.append(f"{name}: not measured")
        elif not bound.allows(g.start, g.end):
            out.append(
                f"{name}: {g.start:g} -> {g.end:g}, more than {bound.relative:.0%}"
                f" or {bound.absolute:g}"
            )
    return out
