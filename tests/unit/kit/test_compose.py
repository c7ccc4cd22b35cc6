"""Starting a service's parts in order: each stop pushed, each liveness watched, and a
start that fails half-way stops exactly what had started, in reverse."""

from __future__ import annotations

import pytest

from mowdeck.kit.compose import Step, start_steps
from mowdeck.kit.http import Readiness
from mowdeck.kit.lifecycle import Resources


def _steps(events: list[str], *, fail_at: str | None = None) -> list[Step]:
    def starter(name: str) -> object:
        def start() -> None:
            if name == fail_at:
                raise ConnectionError(f"{name} is not there")
            events.append(f"start {name}")

        return start

    async def async_start() -> None:
        events.append("start b")

    def stopper(name: str) -> object:
        async def stop() -> None:
            events.append(f"stop {name}")

        return stop

    return [
        Step("a", starter("a"), stopper("a"), lambda: True),  # type: ignore[arg-type]
        Step("b", async_start, stopper("b")),  # type: ignore[arg-type]
        Step("c", starter("c")),  # stopped by its service's own stop
        Step("d", starter("d"), stopper("d"), lambda: False),  # type: ignore[arg-type]
    ]


async def test_parts_start_in_order_and_stop_in_reverse() -> None:
    events: list[str] = []
    resources, readiness, started = Resources(), Readiness(), set[str]()
    await start_steps(resources, readiness, _steps(events), started)
    await resources.close()
    assert events == ["start a", "start b", "start c", "start d", "stop d", "stop b", "stop a"]
    assert started == {"a", "b", "c", "d"}


async def test_a_start_failing_half_way_stops_only_what_started() -> None:
    events: list[str] = []
    resources, readiness, started = Resources(), Readiness(), set[str]()
    with pytest.raises(ConnectionError, match="c is not there"):
        await start_steps(resources, readiness, _steps(events, fail_at="c"), started)
    await resources.close()
    assert events == ["start a", "start b", "stop b", "stop a"]
    assert started == {"a", "b"}


async def test_a_dead_part_fails_health_by_its_name() -> None:
    readiness = Readiness()
    await start_steps(Resources(), readiness, _steps([]), set())
    readiness.set_ready()
    assert readiness.failed() == ["d"]
