"""The allocator's tuning: glibc's thresholds fixed, unless an operator chose them."""

from __future__ import annotations

import asyncio
from asyncio import selector_events

import pytest

from mowdeck.kit import allocator
from mowdeck.kit.allocator import ARENAS, MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES

_TRANSPORT = selector_events._SelectorSocketTransport


def _record(monkeypatch: pytest.MonkeyPatch, answer: int = 1) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return answer

    monkeypatch.setattr(allocator, "mallopt", mallopt)
    return calls


def test_the_thresholds_and_arenas_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record(monkeypatch)
    assert allocator.tune_allocator({}) is True
    assert calls == [(-3, MMAP_THRESHOLD_BYTES), (-1, TRIM_THRESHOLD_BYTES), (-8, ARENAS)]


@pytest.mark.parametrize("variable", allocator.OPERATOR_VARIABLES)
def test_an_operator_s_malloc_variable_leaves_the_allocator_alone(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    calls = _record(monkeypatch)
    assert allocator.tune_allocator({variable: "65536"}) is False
    assert calls == []


def test_a_refused_setting_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    _record(monkeypatch, answer=0)
    assert allocator.tune_allocator({}) is False


def test_without_glibc_nothing_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "mallopt", None)
    assert allocator.tune_allocator({}) is False


@pytest.mark.skipif(allocator.mallopt is None, reason="the C library is not glibc")
def test_glibc_takes_the_settings() -> None:
    assert allocator.tune_allocator({}) is True


@pytest.mark.skipif(allocator.malloc_usage() is None, reason="glibc older than 2.33, or none")
def test_the_allocator_tells_what_it_holds_in_use_and_free() -> None:
    used = bytearray(1 << 16)
    usage = allocator.malloc_usage()
    assert usage is not None
    assert usage[0] >= len(used) and usage[1] >= 0


def test_socket_reads_are_left_as_asyncio_makes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reads bounded below the mapping threshold grew the heap for good (the module's text).
    _record(monkeypatch)
    before = _TRANSPORT.max_size
    assert allocator.tune_allocator({}) is True
    assert _TRANSPORT.max_size == before


def _count_trims(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], asyncio.Event]:
    pads: list[int] = []
    twice = asyncio.Event()

    def malloc_trim(pad: int) -> int:
        pads.append(pad)
        if len(pads) >= 2:
            twice.set()
        return 1

    monkeypatch.setattr(allocator, "_malloc_trim", malloc_trim)
    monkeypatch.setattr(allocator, "TRIMS", allocator.TrimStats())
    return pads, twice


async def test_the_heap_is_trimmed_on_a_timer_while_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    pads, twice = _count_trims(monkeypatch)
    async with allocator.trimming(0.01):
        await asyncio.wait_for(twice.wait(), 5)
    # Past the block the timer is gone, not merely paused.
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "heap-trim"]
    assert len(pads) >= 2
    assert set(pads) == {0}  # the whole heap, no padding kept
    assert allocator.TRIMS.count == len(pads) and allocator.TRIMS.longest >= 0


async def test_an_interval_of_zero_trims_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    pads, _ = _count_trims(monkeypatch)
    async with allocator.trimming(0):
        assert not [t for t in asyncio.all_tasks() if t.get_name() == "heap-trim"]
    assert pads == []


async def test_without_glibc_there_is_no_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "_malloc_trim", None)
    assert allocator.trim_heap() is None
    async with allocator.trimming(0.01):
        assert not [t for t in asyncio.all_tasks() if t.get_name() == "heap-trim"]


@pytest.mark.skipif(allocator._malloc_trim is None, reason="the C library is not glibc")
def test_glibc_trims_its_heap_and_the_time_is_counted() -> None:
    before = allocator.TRIMS.count
    took = allocator.trim_heap()
    assert took is not None and took >= 0
    assert allocator.TRIMS.count == before + 1
