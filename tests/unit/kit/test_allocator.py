"""The allocator's tuning: glibc's thresholds fixed, unless an operator chose them."""

from __future__ import annotations

import pytest

from mowdeck.kit import allocator
from mowdeck.kit.allocator import ARENAS, MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES


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
