"""The C allocator of a long-running service: large buffers outside its heap.

A service's Python objects larger than 512 bytes, and every buffer of a C extension,
come from glibc's ``malloc``. glibc serves a request of 128 KiB or more with a mapping of
its own, returned to the system when freed, but it raises that threshold (up to 32 MiB)
each time such a mapping is freed, and from then on serves the large transient buffers of
a message flow from its heap, between live objects. In the soak (``docs/performance.md``,
"Soak") the memory glibc held free inside its heap grew 70 KB a second, linearly, while
what was in use stayed flat: the process's resident memory grew by 15 % in 7 minutes
after its warm-up.

``tune_allocator`` fixes the thresholds where glibc's own defaults start (which also
turns their raising off) and allows two arenas, as ``MALLOC_MMAP_THRESHOLD_=131072
MALLOC_TRIM_THRESHOLD_=262144 MALLOC_ARENA_MAX=2`` would: the free memory then stayed at
1.5 MB. Where an operator set any of those variables, or the C library is not glibc,
the thresholds are left alone.

The most frequent of those transient buffers is asyncio's own: a socket transport reads
every chunk into a new ``bytes`` of 256 KiB, shrunk to what arrived. Above the fixed
threshold each read is a mapping of its own, made, touched and given back. Against reads
bounded to 16 KiB (served from the heap) that cost a gateway shard 5 % more CPU idle and
11 % more at 300 commands a second, and Telemetry 13 % less per state at full speed; a
gateway shard takes 3.4 times glibc's defaults' page faults and 0-10 % more CPU under
commands (alternated, ``docs/performance.md``, ``allocator``). Every way tried of
keeping the reads off the mappings grew the heap instead: a 1 MiB threshold (+15.6 %
resident in 10 minutes), reads of 64 KiB (+7.5 %), of 16 KiB (glibc's free heap space
growing 0.3 MB a minute for a whole hour, +16.0 %), of 4 KiB (a quarter as fast, at up
to a quarter more Telemetry CPU per state in bursts). With the mappings the 30-minute
soak at 1,000 mowers is flat (resident +3.6 %, the free heap space 1.6 -> 2.1 MB). So
the reads are left as asyncio makes them.

A service also gives the heap's whole free pages back on a timer (``trimming``, every
``MOWDECK_MALLOC_TRIM_INTERVAL_SECONDS``, 60 by default: ``malloc_trim(0)``, 0.4 ms on
average on the event loop). With the fixed thresholds it has little to give back (the
soak: +3.6 % resident with it, +3.8 % without); it stays for an operator's own
``MALLOC_*`` variables that let glibc's threshold rise, where it keeps about half of the
heap's growth out of the resident size (``docs/performance.md``, "Soak").

Like the garbage collector's settings, this is a process's decision, taken where the
process starts (``kit.cli.run_service``, the demo), never inside a library.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import structlog

__all__ = [
    "ARENAS",
    "MMAP_THRESHOLD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "malloc_usage",
    "trim_heap",
    "trim_heap_every",
    "trimming",
    "tune_allocator",
    "tuned_process",
]

log = structlog.get_logger("mowdeck.allocator")

MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept
TRIM_THRESHOLD_BYTES = 256 * 1024  # twice it, as glibc pairs them
ARENAS = 2
# mallopt's parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
OPERATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX")


def _libc(name: str) -> Any:
    """glibc's function ``name``, or None (another C library, or an older glibc)."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c")), name)
    except (OSError, AttributeError):
        return None


mallopt = _libc("mallopt")
if mallopt is not None:
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int


_malloc_trim = _libc("malloc_trim")
if _malloc_trim is not None:
    _malloc_trim.argtypes = [ctypes.c_size_t]
    _malloc_trim.restype = ctypes.c_int


class _MallInfo2(ctypes.Structure):
    _fields_ = tuple(
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
            "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    )  # fmt: skip


_mallinfo2 = _libc("mallinfo2")  # glibc 2.33 or later
if _mallinfo2 is not None:
    _mallinfo2.restype = _MallInfo2


def malloc_usage() -> tuple[int, int] | None:
    """Bytes glibc's allocator holds in use (its mappings included) and free inside its
    heap; None where it cannot tell."""
    if _mallinfo2 is None:
        return None
    info = _mallinfo2()
    return info.uordblks + info.hblkhd, info.fordblks


def tune_allocator(environ: Mapping[str, str] = os.environ) -> bool:
    """Set glibc's thresholds and arenas for this process; True when they were set."""
    chosen = [name for name in OPERATOR_VARIABLES if environ.get(name)]
    if chosen:
        log.info("allocator left as configured", variables=chosen)
        return False
    if mallopt is None:
        return False
    settings = (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
        (_M_ARENA_MAX, ARENAS),
    )
    return all(mallopt(param, value) == 1 for param, value in settings)


class TrimStats:
    """What the timed trims of this process did: how many, how long in all, the longest."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.longest = 0.0

    def add(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds
        self.longest = max(self.longest, seconds)


TRIMS = TrimStats()


def trim_heap() -> float | None:
    """Give the whole free pages inside glibc's heap back to the system
    (``malloc_trim(0)``); the seconds it took, or None where there is no glibc."""
    if _malloc_trim is None:
        return None
    started = time.perf_counter()
    _malloc_trim(0)
    took = time.perf_counter() - started
    TRIMS.add(took)
    return took


async def trim_heap_every(interval: float) -> None:
    """``trim_heap`` every ``interval`` seconds, on the event loop, until cancelled."""
    while True:
        await asyncio.sleep(interval)
        took = trim_heap() or 0.0
        log.debug("heap trimmed", took_ms=round(took * 1000, 2))


@contextlib.asynccontextmanager
async def tuned_process(tuning: bool, trim_interval: float) -> AsyncIterator[None]:
    """A long-running process's allocator while inside: ``tune_allocator`` and the timed
    trim, or nothing at all when ``tuning`` is off (``MOWDECK_MALLOC_TUNING``)."""
    if not tuning:
        yield
        return
    tune_allocator()
    async with trimming(trim_interval):
        yield


@contextlib.asynccontextmanager
async def trimming(interval: float) -> AsyncIterator[None]:
    """Trim the heap every ``interval`` seconds while inside (0: never)."""
    if interval <= 0 or _malloc_trim is None:
        yield
        return
    task = asyncio.create_task(trim_heap_every(interval), name="heap-trim")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
