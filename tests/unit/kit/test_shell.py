"""The composition root's shell: stop-on-failure, its URL, the bus and authorizer preludes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import cast

import asyncpg
import pytest
from prometheus_client import CollectorRegistry
from structlog.contextvars import get_contextvars

from mowdeck.authz import Authorizer, AuthzSettings, LocalAuthorizer
from mowdeck.kit.bus import Bus
from mowdeck.kit.bus_permissions import user as bus_user
from mowdeck.kit.http import Readiness
from mowdeck.kit.lifecycle import Resources
from mowdeck.kit.settings import BaseSettings, SettingsError
from mowdeck.kit.shell import ServiceShell


class Parts(ServiceShell[BaseSettings, object]):
    """A service whose start pushes ``a`` and ``b``, then fails, hangs or returns."""

    name = "parts"

    def __init__(self, events: list[str], *, then: str) -> None:
        super().__init__(BaseSettings(), None)
        self.events = events
        self._then = then

    async def _start(self) -> None:
        for part in ("a", "b"):
            self.events.append(f"start {part}")
            self._resources.push_sync(lambda p=part: self.events.append(f"stop {p}"), name=part)
        if self._then == "fail":
            raise ConnectionError("c is not there")
        if self._then == "hang":
            await asyncio.Event().wait()  # PostgreSQL not there yet, say


class ShuttingDown(Parts):
    stopping_reason = "shutting down"


async def test_a_failed_start_releases_what_it_started_in_reverse_and_raises() -> None:
    events: list[str] = []
    service = Parts(events, then="fail")
    with pytest.raises(ConnectionError):
        await service.start()
    assert events == ["start a", "start b", "stop b", "stop a"]
    assert (service.readiness.ready, service.readiness.reason) == (False, "stopping")
    await service.stop()  # a second stop releases nothing twice
    assert events == ["start a", "start b", "stop b", "stop a"]


async def test_a_cancelled_start_releases_what_it_started() -> None:
    events: list[str] = []
    service = Parts(events, then="hang")
    starting = asyncio.ensure_future(service.start())
    while len(events) < 2:
        await asyncio.sleep(0)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert events == ["start a", "start b", "stop b", "stop a"]


async def test_a_started_service_releases_only_at_stop_with_its_own_reason() -> None:
    events: list[str] = []
    service = ShuttingDown(events, then="return")
    await service.start()
    assert events == ["start a", "start b"]
    await service.stop()
    assert events == ["start a", "start b", "stop b", "stop a"]
    assert service.readiness.reason == "shutting down"


def test_the_url_before_start_is_an_error_naming_the_service() -> None:
    with pytest.raises(RuntimeError, match="Parts is not started"):
        _ = Parts([], then="return").url


def test_a_metrics_registry_passed_in_is_the_one_used() -> None:
    registry = CollectorRegistry()
    assert ServiceShell(BaseSettings(), registry).metrics_registry is registry
    assert isinstance(ServiceShell(BaseSettings(), None).metrics_registry, CollectorRegistry)


class GivenBus:
    """A bus passed in: it records which streams were asked for and whether it drained."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.drained = False

    async def missing_streams(self, names: Iterable[str]) -> list[str]:
        self.asked.extend(names)
        return []

    async def drain(self) -> None:
        self.drained = True


async def test_bus_for_a_given_bus_checks_the_users_streams_and_never_drains_it() -> None:
    given = GivenBus()
    resources = Resources()
    bus = await resources.bus_for(
        cast("Bus", given),
        BaseSettings(nats_url="nats://nowhere:1"),
        user="telemetry",
        readiness=Readiness(),
        registry=CollectorRegistry(),
    )
    assert bus is given
    assert given.asked == list(bus_user("telemetry").streams)
    assert given.asked  # telemetry needs streams: the check above compared something
    await resources.close()
    assert not given.drained


class GivenAuthorizer:
    closed = False

    async def close(self) -> None:
        self.closed = True


async def test_a_given_authorizer_is_used_and_never_closed() -> None:
    given = GivenAuthorizer()
    resources = Resources()
    pool = cast("asyncpg.Pool", object())
    assert resources.authorizer(cast("Authorizer", given), None, pool) is given
    await resources.close()
    assert not given.closed


async def test_an_authorizer_built_from_the_settings_on_the_pool_is_closed_at_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[object] = []

    async def close(self: LocalAuthorizer) -> None:
        closed.append(self)

    monkeypatch.setattr(LocalAuthorizer, "close", close)
    resources = Resources()
    pool = cast("asyncpg.Pool", object())
    built = resources.authorizer(None, AuthzSettings(authz="local"), pool)
    assert isinstance(built, LocalAuthorizer)
    assert closed == []
    await resources.close()
    assert closed == [built]
    with pytest.raises(SettingsError, match="pass a pool"):
        resources.authorizer(None, AuthzSettings(authz="local"), None)


class Remembers(ServiceShell[BaseSettings, object]):
    """A service whose start leaves a task behind, and whose stop notes what is bound."""

    name = "remembers"

    def __init__(self) -> None:
        super().__init__(BaseSettings(), None)
        self.at_stop: list[dict[str, object]] = []
        self.task: asyncio.Task[dict[str, object]] | None = None

    async def _start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(_bound_later())
        self._resources.push_sync(lambda: self.at_stop.append(get_contextvars()), name="probe")


async def _bound_later() -> dict[str, object]:
    await asyncio.sleep(0)  # after the start has returned
    return get_contextvars()


async def test_what_the_start_creates_and_what_the_stop_runs_log_as_the_service() -> None:
    service = Remembers()
    await service.start()
    assert get_contextvars() == {}  # the caller's own context is as it was
    assert service.task is not None
    assert await service.task == {"service": "remembers"}
    await service.stop()
    assert service.at_stop == [{"service": "remembers"}]


def test_a_service_reports_its_process() -> None:
    registry = Parts([], then="return").metrics_registry
    assert registry.get_sample_value("process_resident_memory_bytes")
    assert registry.get_sample_value("process_open_fds")
