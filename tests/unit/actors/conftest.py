"""Fixtures for the actor runtime tests: a running dispatcher and a leak check."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pykka
import pytest
from prometheus_client import CollectorRegistry

from actors import ActorMetrics, Dispatcher
from actors.testing import leftover_actors_and_threads

_THREADS = ("mowdeck-actors-", "ThreadingProbe-")


@pytest.fixture(autouse=True)
def no_leftover_actors_or_threads() -> Iterator[None]:
    """Fail a test that leaves an actor registered or an actor/worker thread alive."""
    assert leftover_actors_and_threads(_THREADS) == [], "a previous test leaked"
    yield
    deadline = time.monotonic() + 3.0
    leftovers = leftover_actors_and_threads(_THREADS)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.01)  # ThreadingActor threads exit a moment after their stop returns
        leftovers = leftover_actors_and_threads(_THREADS)
    if leftovers:
        pykka.ActorRegistry.stop_all(timeout=2)  # don't let one leak fail every later test
    assert leftovers == []


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry) -> ActorMetrics:
    return ActorMetrics(registry)


@pytest.fixture
def dispatcher(metrics: ActorMetrics) -> Iterator[Dispatcher]:
    dispatcher = Dispatcher(workers=2, batch=32, metrics=metrics, name="test")
    dispatcher.start()
    yield dispatcher
    assert dispatcher.stop(timeout=5)
