"""Benchmark: DispatcherActor against pykka's ThreadingActor, in one run.

    .venv/bin/python tests/bench/actors.py            # full sizes (about a minute)
    .venv/bin/python tests/bench/actors.py --smoke    # small sizes, a few seconds (CI)

Measures start/stop time and memory of N actors, `tell` throughput spread round-robin
over them, `ask` round-trip percentiles, and the latency of an emergency message sent
while a backlog of normal messages drains. Prints a last line starting with `RESULT`.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykka
from prometheus_client import CollectorRegistry

if __package__ in (None, ""):
    # Run as a script, sys.path[0] is tests/bench, where this very file is `actors`: put
    # the repo root first so `import actors` finds the package.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from actors import ActorMetrics, Dispatcher, DispatcherActor, Emergency


@dataclass(frozen=True)
class Sizes:
    actors: int
    tells: int
    threading_actors: int
    threading_tells: int
    asks: int
    backlog: int
    emergencies: int


FULL = Sizes(10_000, 200_000, 10_000, 10_000, 5_000, 100_000, 600)
SMOKE = Sizes(500, 5_000, 200, 1_000, 300, 5_000, 30)


class Alarm(Emergency):
    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent = time.perf_counter()


@dataclass
class Shared:
    """What every bench actor reports into (one per run, no globals)."""

    started: itertools.count[int] = field(default_factory=itertools.count)
    handled: itertools.count[int] = field(default_factory=itertools.count)
    target: int = 0
    all_started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    latencies: list[float] = field(default_factory=list)
    expected_starts: int = 0
    progress: int = 0  # approximate (unlocked) count of handled messages


class Behaviour:
    shared: Shared

    def on_start(self) -> None:
        if next(self.shared.started) + 1 == self.shared.expected_starts:
            self.shared.all_started.set()

    def on_receive(self, message: Any) -> Any:
        if type(message) is Alarm:
            self.shared.latencies.append(time.perf_counter() - message.sent)
            return None
        if type(message) is threading.Event:
            message.wait()
            return None
        self.shared.progress += 1
        if next(self.shared.handled) + 1 == self.shared.target:
            self.shared.done.set()
        return message


class BenchDispatcherActor(Behaviour, DispatcherActor):
    def __init__(self, *, dispatcher: Dispatcher, shared: Shared) -> None:
        super().__init__(dispatcher=dispatcher)
        self.shared = shared


class BenchThreadingActor(Behaviour, pykka.ThreadingActor):
    use_daemon_thread = True

    def __init__(self, *, shared: Shared) -> None:
        super().__init__()
        self.shared = shared


def rss_bytes() -> int:
    """Resident set size of this process."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_many(
    count: int, shared: Shared, start: Callable[[], pykka.ActorRef[Any]]
) -> tuple[list[pykka.ActorRef[Any]], float, int]:
    """Start `count` actors; return them, seconds until all ran on_start, RSS growth."""
    gc.collect()
    shared.expected_starts = count
    before = rss_bytes()
    began = time.perf_counter()
    refs = [start() for _ in range(count)]
    assert shared.all_started.wait(120), "actors did not start"
    took = time.perf_counter() - began
    return refs, took, rss_bytes() - before


def tell_round_robin(refs: list[pykka.ActorRef[Any]], shared: Shared, messages: int) -> float:
    """Tell `messages` spread round-robin; return messages/s until all were handled."""
    shared.handled = itertools.count()
    shared.done.clear()
    shared.target = messages
    count = len(refs)
    began = time.perf_counter()
    for i in range(messages):
        refs[i % count].tell(i)
    assert shared.done.wait(300), "tells were not all handled"
    return messages / (time.perf_counter() - began)


def ask_round_trips(refs: list[pykka.ActorRef[Any]], asks: int) -> list[float]:
    """Blocking asks to random actors, one at a time; return round trips in seconds."""
    rng = random.Random(7)
    samples = []
    for i in range(asks):
        ref = rng.choice(refs)
        began = time.perf_counter()
        ref.ask(i)
        samples.append(time.perf_counter() - began)
    return samples


def emergency_latencies(
    refs: list[pykka.ActorRef[Any]], shared: Shared, sizes: Sizes
) -> tuple[list[float], int]:
    """Send emergencies while a backlog of normal mail drains; return their latencies."""
    rng = random.Random(11)
    shared.latencies.clear()
    rounds = 0
    # The cap only guards against a hang: a round yields fewer samples the faster the
    # backlog drains (the sender waits for the GIL while the workers run).
    while len(shared.latencies) < sizes.emergencies and rounds < 60:
        rounds += 1
        # Park the workers so the whole backlog is queued before anything drains.
        parked = threading.Event()
        refs[0].tell(parked)
        refs[1].tell(parked)
        shared.handled = itertools.count()
        shared.progress = 0
        shared.done.clear()
        shared.target = sizes.backlog
        count = len(refs)
        for i in range(sizes.backlog):
            refs[i % count].tell(i)
        parked.set()
        sent_before = len(shared.latencies)
        # One emergency about every millisecond while at least 10 % of the backlog is left.
        while not shared.done.is_set() and shared.progress < 0.9 * sizes.backlog:
            rng.choice(refs).tell(Alarm())
            time.sleep(0.001)
        assert shared.done.wait(120)
        if len(shared.latencies) == sent_before:
            break
    return list(shared.latencies), rounds


def run_dispatcher(sizes: Sizes, workers: int) -> dict[str, float]:
    registry = CollectorRegistry()
    # A generous slow-handler threshold: full GC passes over 10,000 actors would log.
    dispatcher = Dispatcher(
        workers=workers, batch=32, slow_handler_seconds=1.0, metrics=ActorMetrics(registry)
    )
    dispatcher.start()
    shared = Shared()
    refs, start_s, rss = start_many(
        sizes.actors,
        shared,
        lambda: BenchDispatcherActor.start(dispatcher=dispatcher, shared=shared),
    )
    tell_rate = tell_round_robin(refs, shared, sizes.tells)
    asks = ask_round_trips(refs, sizes.asks)
    latencies, rounds = emergency_latencies(refs, shared, sizes)
    began = time.perf_counter()
    for ref in refs:
        ref.stop(block=False)
    assert dispatcher.stop(timeout=120)
    stop_s = time.perf_counter() - began
    return {
        "start_s": start_s,
        "stop_s": stop_s,
        "rss_per_actor_kb": rss / sizes.actors / 1024,
        "tell_per_s": tell_rate,
        "ask_p50_ms": statistics.median(asks) * 1e3,
        "ask_p99_ms": percentile(asks, 0.99) * 1e3,
        "emergency_p50_ms": statistics.median(latencies) * 1e3,
        "emergency_p99_ms": percentile(latencies, 0.99) * 1e3,
        "emergency_max_ms": max(latencies) * 1e3,
        "emergency_samples": len(latencies),
        "emergency_rounds": rounds,
    }


def run_threading(sizes: Sizes) -> dict[str, float]:
    shared = Shared()
    refs, start_s, rss = start_many(
        sizes.threading_actors, shared, lambda: BenchThreadingActor.start(shared=shared)
    )
    tell_rate = tell_round_robin(refs, shared, sizes.threading_tells)
    asks = ask_round_trips(refs, min(sizes.asks, 2_000))
    began = time.perf_counter()
    futures = [ref.stop(block=False) for ref in refs]
    for future in futures:
        future.get(timeout=120)
    stop_s = time.perf_counter() - began
    return {
        "start_s": start_s,
        "stop_s": stop_s,
        "rss_per_actor_kb": rss / sizes.threading_actors / 1024,
        "tell_per_s": tell_rate,
        "ask_p50_ms": statistics.median(asks) * 1e3,
        "ask_p99_ms": percentile(asks, 0.99) * 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, a few seconds")
    parser.add_argument("--workers", type=int, default=2, help="dispatcher workers")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    print(f"sizes: {sizes}  workers={args.workers}  cpus={os.cpu_count()}", flush=True)

    ours = run_dispatcher(sizes, args.workers)
    print(f"DispatcherActor x{sizes.actors}:", flush=True)
    for key, value in ours.items():
        print(f"  {key:>20} {value:,.3f}", flush=True)
    theirs = run_threading(sizes)
    print(f"ThreadingActor x{sizes.threading_actors}:", flush=True)
    for key, value in theirs.items():
        print(f"  {key:>20} {value:,.3f}", flush=True)
    assert pykka.ActorRegistry.get_all() == []

    # Start time scaled to 10,000 actors (it is linear), so smoke runs print comparable keys.
    scale = 10_000 / sizes.actors
    threading_scale = 10_000 / sizes.threading_actors
    print(
        "RESULT"
        f" start_10k_s={ours['start_s'] * scale:.3f}"
        f" threading_start_10k_s={theirs['start_s'] * threading_scale:.3f}"
        f" tell_10k_msgs_per_s={ours['tell_per_s']:.0f}"
        f" threading_tell_10k_msgs_per_s={theirs['tell_per_s']:.0f}"
        f" ask_p99_ms={ours['ask_p99_ms']:.3f}"
        f" emergency_p99_ms={ours['emergency_p99_ms']:.3f}"
        f"{' smoke=1' if args.smoke else ''}",
        flush=True,
    )


if __name__ == "__main__":
    main()
