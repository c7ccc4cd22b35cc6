"""Fixtures for real servers: NATS with JetStream and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import structlog

from mowdeck.kit.bus import Bus
from tests.support.jetstream import recreate_streams
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database
from tests.support.settings import fast_path_from_environment
from tests.support.taskdump import dump_tasks_after

# Seconds before a test's timeout at which every asyncio task's stack is printed.
_TASK_DUMP_AHEAD_S = 15.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test that runs into its timeout reports where each of its tasks waited."""
    marker = item.get_closest_marker("timeout")
    timeout = (
        float(marker.args[0])
        if marker and marker.args
        else float(item.config.getini("timeout") or 0)
    )
    call_off = dump_tasks_after(max(1.0, timeout - _TASK_DUMP_AHEAD_S)) if timeout > 0 else None
    try:
        yield
    finally:
        if call_off is not None:
            call_off()


@pytest.fixture(autouse=True)
def _logging_left_as_found(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests that run a command in-process configure logging as the process would.

    That configuration must not outlive the test: its handler writes to the test's
    captured stderr (closed afterwards), and loggers cached on first use would keep it
    for good, out of reach of ``structlog.testing.capture_logs`` in later tests.
    """
    configure = structlog.configure
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def uncached(**kwargs: Any) -> None:
        configure(**{**kwargs, "cache_logger_on_first_use": False})

    monkeypatch.setattr(structlog, "configure", uncached)
    yield
    configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """One NATS server for the session; tests that stop it use ``own_nats_server``."""
    server = NatsServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def own_nats_server() -> Iterator[NatsServer]:
    """A NATS server of this test alone, free to stop and restart."""
    server = NatsServer()
    server.start()
    yield server
    server.close()


@pytest.fixture
def nats_fast_path() -> bool:
    """``MOWDECK_NATS_FAST_PATH`` as a service reads it; a module may pin it instead."""
    return fast_path_from_environment()


@pytest.fixture
async def bus(nats_server: NatsServer, nats_fast_path: bool) -> AsyncIterator[Bus]:
    """A connected bus on fresh streams (every stream of earlier tests is deleted).

    The streams are made as the admin step makes them (``mowdeck streams``): services
    only wait for them.
    """
    b = await Bus.connect(nats_server.url, name="test", fast_path=nats_fast_path)
    try:
        await recreate_streams(b)
        yield b
    finally:
        await b.drain()


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test module."""
    url = create_database()
    yield url
    drop_database(url)
