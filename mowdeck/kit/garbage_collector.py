"""The garbage collector of a long-running service: its pauses as a metric, and a freeze.

A service holds many objects for its whole life (a gateway's controllers and links, a
simulator's mowers). Each full collection walks all of them with the event loop stopped:
in a gateway with 1,000 mowers that is a pause long enough to show in an emergency stop's
latency. ``freeze_long_lived`` moves what is alive now into the permanent generation, out
of the collector's sight, once start-up has built it; ``GcPauses`` makes every pause
visible as ``mowdeck_gc_pause_seconds{generation}``, and ``mowdeck_gc_frozen_objects``
counts what was frozen through it.

Freezing is a process's decision, taken where the process starts (a command's entry
point), never inside a library: it changes the collector for everything in the process.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import structlog
from prometheus_client import CollectorRegistry, Gauge, Histogram

__all__ = [
    "FREEZE_AFTER_STARTS",
    "GcPauses",
    "freeze",
    "freeze_after_actor_starts",
    "freeze_long_lived",
    "set_young_threshold",
    "unfreeze",
]

log = structlog.get_logger("mowdeck.gc")

# Starting this many actors at once is start-up (or a shard moving here): a good moment to
# move what now lives for good out of the collector's sight.
FREEZE_AFTER_STARTS = 100

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class GcPauses:
    """Observes the duration of every garbage collection of the process, by generation.

    Install once per process (``install``/``uninstall``); collections may run on any
    thread, and never two at once.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "mowdeck_gc_pause_seconds",
            "Garbage collection pauses (every thread of the process waits).",
            ["generation"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self._children = [self.histogram.labels(str(g)) for g in range(3)]
        self.frozen = Gauge(
            "mowdeck_gc_frozen_objects",
            "Objects moved out of the garbage collector's sight (gc.freeze).",
            registry=registry,
        )
        # ``gc.get_freeze_count`` walks the whole permanent generation with the interpreter
        # held (about 9 ms per million objects): neither a scrape nor a freeze pays that.
        # A freeze adds what it moved (what the other generations held), unfreeze clears.
        self._frozen = 0
        self.frozen.set_function(lambda: self._frozen)
        self._started = 0.0

    def install(self) -> None:
        """Start observing."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        """Stop observing."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def freeze(self) -> int:
        """``freeze()``, counted in ``mowdeck_gc_frozen_objects``; the objects it froze."""
        moved = freeze()
        self._frozen += moved
        return moved

    def freeze_long_lived(self, reason: str) -> int:
        """``freeze_long_lived(reason)``, counted in ``mowdeck_gc_frozen_objects``."""
        moved = freeze_long_lived(reason)
        self._frozen += moved
        return moved

    def unfreeze(self) -> None:
        """``unfreeze()``, counted in ``mowdeck_gc_frozen_objects``."""
        unfreeze()
        self._frozen = 0

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._children[info["generation"]].observe(time.perf_counter() - self._started)


def freeze_long_lived(reason: str) -> int:
    """Collect once, then move every surviving object out of the collector's sight.

    For a process's composition root, after start-up has built what lives as long as the
    process. Objects frozen are never collected, so call it when what is alive is meant
    to stay (not in a test process that builds and drops services).
    """
    started = time.perf_counter()
    gc.collect()
    objects = freeze()
    log.info(
        "long-lived objects frozen",
        reason=reason,
        objects=objects,
        took_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return objects


def freeze() -> int:
    """``gc.freeze()``; how many objects it moved out of the collector's sight.

    Counted in the generations it empties (the objects made since the last freeze, when
    the process freezes after each burst of start-up), not with ``gc.get_freeze_count``,
    which walks every object frozen so far (a few ms per burst at 10,000 actors).
    """
    # Three calls, no generator: a generator would be counted and gone before the freeze.
    moved = len(gc.get_objects(0)) + len(gc.get_objects(1)) + len(gc.get_objects(2))
    gc.freeze()
    return moved


def unfreeze() -> None:
    """``gc.unfreeze()``."""
    gc.unfreeze()


def set_young_threshold(threshold: int) -> None:
    """Collect the youngest generation every ``threshold`` allocations (0: leave as is).

    Python's default, 700, suits short scripts. A service with thousands of messages in
    flight then promotes them all to the older generations before they die (they live a
    few hundred milliseconds), and the full collections that follow walk them with the
    loop stopped. A larger young generation lets them die young.
    """
    if threshold:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)


class _WithGcPauses(Protocol):
    @property
    def gc_pauses(self) -> GcPauses: ...


S = TypeVar("S", bound=_WithGcPauses)


def freeze_after_actor_starts(
    build: Callable[[Callable[[int], None]], S], *, after: int = FREEZE_AFTER_STARTS
) -> S:
    """A service built by ``build(on_actors_started)`` that freezes the process's live
    objects (through its ``gc_pauses``) whenever one batch started ``after`` actors or more.

    The actors and what they hold live as long as the service; without the freeze every
    full collection walks them again (docs/actors.md). For a process that runs the
    service for good (a command's entry point), not one that builds and drops services.
    """
    built: list[S] = []

    def started(count: int) -> None:
        if count >= after and built:
            built[0].gc_pauses.freeze()

    built.append(build(started))
    return built[0]
