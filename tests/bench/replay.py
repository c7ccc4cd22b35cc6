"""What the replay benchmarks share: feed a pipeline stand-in deliveries, measure the CPU.

``telemetry_replay`` and ``notifications_replay`` drive a service's state pipeline alone
(no NATS: ``tests.support.fakes.FakeMsg`` records the acks). ``measure`` runs the warm-up
round (it starts the actors; its CPU per state is the cold figure), then the measured
rounds with every message queued before the loop runs, so each batch is full; under
``valgrind --tool=callgrind --instr-atstart=no`` with ``MOWDECK_BENCH_CALLGRIND=1`` the
instruction count covers the measured rounds only.
"""

from __future__ import annotations

import cProfile
import gc
import os
import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tests.support.fakes import FakeMsg

__all__ = ["Pipeline", "Replayed", "cpu_seconds", "measure"]


class Pipeline(Protocol):
    """A batching pipeline as the services run it: started, fed, stopped."""

    def start(self) -> None: ...

    def take(self, msg: FakeMsg, /) -> None: ...

    async def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Replayed:
    """CPU and wall time of the warm-up and the measured rounds."""

    warm: int
    measured: int
    cold_cpu_s: float
    cpu_s: float
    wall_s: float

    def result(self, batch: int) -> str:
        """The RESULT line."""
        return (
            f"RESULT batch={batch} states={self.measured} "
            f"cpu_us_per_state={self.cpu_s / self.measured * 1e6:.1f} wall_s={self.wall_s:.2f} "
            f"cold_cpu_us_per_state={self.cold_cpu_s / self.warm * 1e6:.1f}"
        )


def cpu_seconds() -> float:
    """This process's CPU time (every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def callgrind(*, on: bool) -> None:
    """Instructions counted between ``on=True`` and ``on=False`` only (with
    ``MOWDECK_BENCH_CALLGRIND=1`` under ``valgrind --tool=callgrind --instr-atstart=no``)."""
    if os.environ.get("MOWDECK_BENCH_CALLGRIND"):
        subprocess.run(
            ["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
            check=False,
            capture_output=True,
        )


async def _feed(pipeline: Pipeline, msgs: Sequence[FakeMsg]) -> None:
    # All queued first, then the loop drains them: every batch is full.
    pipeline.start()
    for msg in msgs:
        pipeline.take(msg)
    await pipeline.stop()


async def measure(
    pipeline: Pipeline,
    warm: Sequence[FakeMsg],
    measured: Sequence[FakeMsg],
    *,
    profile: str | None = None,
) -> Replayed:
    """Feed ``warm``, then ``measured`` (profiled into ``profile`` if given); every
    measured delivery must have been acknowledged."""
    cold = cpu_seconds()
    await _feed(pipeline, warm)
    cold = cpu_seconds() - cold
    gc.collect()
    profiler = cProfile.Profile() if profile else None
    callgrind(on=True)
    if profiler is not None:
        profiler.enable()
    cpu, wall = cpu_seconds(), time.perf_counter()
    await _feed(pipeline, measured)
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    callgrind(on=False)
    acked = sum(1 for msg in measured if msg.outcome == "ack")
    assert acked == len(measured), f"{acked} of {len(measured)} acknowledged"
    return Replayed(len(warm), len(measured), cold, cpu, wall)
