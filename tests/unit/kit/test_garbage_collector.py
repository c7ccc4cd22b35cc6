"""The garbage collector helpers: pause metric, young threshold, freeze."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from mowdeck.kit.garbage_collector import (
    FREEZE_AFTER_STARTS,
    GcPauses,
    freeze_after_actor_starts,
    freeze_long_lived,
    set_young_threshold,
    unfreeze,
)


@pytest.fixture
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def _sample(registry: CollectorRegistry, name: str, generation: str) -> float:
    value = registry.get_sample_value(name, {"generation": generation})
    return 0.0 if value is None else value


def test_every_collection_is_observed_by_generation() -> None:
    registry = CollectorRegistry()
    pauses = GcPauses(registry)
    pauses.install()
    try:
        gc.collect(0)
        gc.collect(2)
        gc.collect(2)
    finally:
        pauses.uninstall()
    assert _sample(registry, "mowdeck_gc_pause_seconds_count", "0") >= 1
    assert _sample(registry, "mowdeck_gc_pause_seconds_count", "2") >= 2
    assert _sample(registry, "mowdeck_gc_pause_seconds_sum", "2") > 0
    observed = _sample(registry, "mowdeck_gc_pause_seconds_count", "2")
    gc.collect(2)  # after uninstall: not observed
    assert _sample(registry, "mowdeck_gc_pause_seconds_count", "2") == observed


def test_install_twice_observes_once() -> None:
    registry = CollectorRegistry()
    pauses = GcPauses(registry)
    pauses.install()
    pauses.install()
    try:
        assert gc.callbacks.count(pauses._on_gc) == 1
    finally:
        pauses.uninstall()
    assert pauses._on_gc not in gc.callbacks


@pytest.mark.usefixtures("thresholds")
def test_young_threshold_leaves_the_older_generations() -> None:
    gc.set_threshold(700, 10, 10)
    set_young_threshold(20_000)
    assert gc.get_threshold() == (20_000, 10, 10)
    set_young_threshold(0)  # 0 leaves it as it is
    assert gc.get_threshold() == (20_000, 10, 10)


def test_freeze_moves_live_objects_out_of_sight() -> None:
    registry = CollectorRegistry()
    pauses = GcPauses(registry)  # its gauge reads the count taken at its last freeze
    try:
        pauses.freeze_long_lived("test")
        assert gc.get_freeze_count() > 0
        assert registry.get_sample_value("mowdeck_gc_frozen_objects") == gc.get_freeze_count()
    finally:
        pauses.unfreeze()
    assert gc.get_freeze_count() == 0
    assert registry.get_sample_value("mowdeck_gc_frozen_objects") == 0
    try:
        assert freeze_long_lived("no gauge") > 0  # a process without one
    finally:
        unfreeze()


class _CountingPauses(GcPauses):
    def __init__(self) -> None:
        super().__init__(CollectorRegistry())
        self.frozen = 0

    def freeze(self) -> int:
        self.frozen += 1
        return 0


class _Service:
    def __init__(self, on_actors_started: Callable[[int], None]) -> None:
        self.gc_pauses = _CountingPauses()
        self.on_actors_started = on_actors_started


def test_a_burst_of_actor_starts_freezes_through_the_service() -> None:
    service = freeze_after_actor_starts(_Service)
    service.on_actors_started(FREEZE_AFTER_STARTS - 1)  # a few actors: not start-up
    assert service.gc_pauses.frozen == 0
    service.on_actors_started(FREEZE_AFTER_STARTS)
    service.on_actors_started(5_000)
    assert service.gc_pauses.frozen == 2


def test_the_burst_size_is_a_parameter() -> None:
    service = freeze_after_actor_starts(_Service, after=3)
    service.on_actors_started(2)
    service.on_actors_started(3)
    assert service.gc_pauses.frozen == 1


def test_freezes_add_up_to_what_the_collector_holds_frozen() -> None:
    registry = CollectorRegistry()
    pauses = GcPauses(registry)
    kept: list[object] = []
    try:
        first = pauses.freeze()
        kept.extend([{"n": n}] for n in range(1_000))  # a burst of start-up
        second = pauses.freeze()
        assert second >= 1_000
        assert first + second == gc.get_freeze_count()
        assert registry.get_sample_value("mowdeck_gc_frozen_objects") == gc.get_freeze_count()
    finally:
        pauses.unfreeze()
    assert registry.get_sample_value("mowdeck_gc_frozen_objects") == 0
