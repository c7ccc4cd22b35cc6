"""The soak's judgement of what grew after its warm-up."""

from __future__ import annotations

from typing import Any

import pytest

from tests.soak.growth import Bound, growths, violations
from tests.soak.report import unbounded


def _sample(t: float, *, files: int, tasks: int, history: int) -> dict[str, Any]:
    proc = {"rss_mb": 100.0, "open_files": files, "threads": 9, "processes": 1, "cpu_s": t}
    return {
        "t": t,
        "tasks": tasks,
        "python_threads": 9,
        "processes": {"demo": proc, "nats-server": {**proc, "open_files": 20}},
        "streams": {"TELEMETRY": {"messages": 10 * t, "bytes": 100 * t}},
        "tables": {"mower_history": {"rows": history, "bytes": 8192}},
    }


@pytest.mark.parametrize(
    ("start", "end", "allowed"),
    [(100, 110, True), (100, 111, False), (10, 14, True), (10, 15, False), (0, 4, True)],
    ids=["10pc", "past-10pc", "slack", "past-slack", "from-zero"],
)
def test_bound_takes_the_larger_of_relative_and_absolute(
    start: float, end: float, allowed: bool
) -> None:
    assert Bound(0.10, 4).allows(start, end) is allowed


def test_a_leak_of_one_descriptor_per_sample_fails_the_gate() -> None:
    samples = [_sample(t, files=2000 + 30 * t, tasks=3000, history=100) for t in range(20)]
    found = growths(samples, warmup_s=5)
    assert [v.split(":")[0] for v in violations(found)] == ["demo.open_files"]


def test_the_warm_up_is_not_judged_and_retention_bounded_tables_may_grow() -> None:
    warm_up = [_sample(t, files=100 * t, tasks=10 * t, history=100) for t in range(5)]
    steady = [_sample(t, files=2000, tasks=3000, history=100 * t) for t in range(5, 20)]
    found = growths(warm_up + steady, warmup_s=5)
    assert violations(found) == []
    assert found["table.mower_history.rows"].percent > 100
    assert unbounded(found) == []


def test_too_few_samples_after_the_warm_up_is_an_error() -> None:
    samples = [_sample(t, files=10, tasks=10, history=1) for t in range(8)]
    with pytest.raises(ValueError, match="samples after the warm-up"):
        growths(samples, warmup_s=4)


def test_the_heap_s_measures_are_reported_and_a_growing_c_heap_is_unbounded() -> None:
    samples = [_sample(t, files=2000, tasks=3000, history=100) for t in range(20)]
    for s in samples:
        s["heap"] = {"py_blocks": 500_000, "malloc_used_mb": 50.0 + 2 * s["t"]}
    found = growths(samples, warmup_s=5)
    assert found["demo.heap.py_blocks"].percent == 0
    assert [g.name for g in unbounded(found)] == ["demo.heap.malloc_used_mb"]


def test_postgres_backends_open_files_are_bounded_and_the_bound_is_reported() -> None:
    samples = [_sample(t, files=2000, tasks=3000, history=100) for t in range(20)]
    for s in samples:
        count = 30 if s["t"] < 10 else 39  # a pool grew under load, within its max_size
        backends = {"rss_mb": 500.0, "open_files": 1000 + 50 * s["t"], "threads": count,
                    "processes": count, "cpu_s": 1.0}  # fmt: skip
        s["processes"]["postgres"] = backends
        s["relation_files"] = 570
    found = growths(samples, warmup_s=5)
    assert found["postgres.open_files"].percent > 10
    assert found["postgres.relation_files"].end == 570
    assert unbounded(found) == []
    # The same growth in the services' own process is not excused.
    for s in samples:
        s["processes"]["demo"]["rss_mb"] = 100.0 + 5 * s["t"]
    assert [g.name for g in unbounded(growths(samples, warmup_s=5))] == ["demo.rss_mb"]


def test_a_gated_measure_within_its_slack_is_not_reported_as_growing() -> None:
    samples = [_sample(t, files=2000, tasks=3000, history=100) for t in range(20)]
    for s in samples:
        s["processes"]["nats-server"]["threads"] = 10 if s["t"] < 10 else 12
    assert unbounded(growths(samples, warmup_s=5)) == []
    for s in samples:
        s["processes"]["nats-server"]["threads"] = 10 if s["t"] < 10 else 13
    assert [g.name for g in unbounded(growths(samples, warmup_s=5))] == ["nats-server.threads"]
