"""What every service's composition root shares: start, stop, readiness, its parts, its URL.

A service subclasses ``ServiceShell`` and writes ``_start()`` in the three moves of
``kit/compose.py``: ``open_base`` (the shared prologue), its own pure ``build`` (kept in
``self.parts``) and ``start_steps``, then ``_listen``. ``start()`` stops a start that
failed or was cancelled half-way, so exactly what was started is released, and ``stop()``
refuses traffic and releases the rest in reverse order. A service with a shutdown order of
its own overrides ``stop()``.

Both run with ``service`` bound to the service's name (``kit/logging.py``): every line
logged by the start, and by every task, handler and callback the start creates, says
which service it is from.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, ProcessCollector

from mowdeck.kit.compose import Base, Given, Needs, Step, open_base, start_steps
from mowdeck.kit.garbage_collector import GcPauses
from mowdeck.kit.http import Readiness
from mowdeck.kit.http_server import HttpServer
from mowdeck.kit.lifecycle import Resources
from mowdeck.kit.logging import bound
from mowdeck.kit.settings import BaseSettings

__all__ = ["ServiceShell"]

S = TypeVar("S", bound=BaseSettings)
P = TypeVar("P")


class ServiceShell(Generic[S, P]):
    """The lifecycle of a composition root; subclasses set ``name`` and write ``_start()``.

    ``P`` is the frozen dataclass of the parts the service's ``build`` returns.
    """

    name: str
    stopping_reason = "stopping"  # what /readyz says once stop() has begun

    def __init__(self, settings: S, metrics_registry: CollectorRegistry | None) -> None:
        self.settings = settings
        self.metrics_registry = (
            metrics_registry if metrics_registry is not None else CollectorRegistry()
        )
        self.readiness = Readiness()
        self._resources = Resources()
        self.gc_pauses = GcPauses(self.metrics_registry)
        # The process's resident memory, CPU and open files (process_*), for its pod's
        # dashboards and for a climb in memory (docs/operations.md, "Memory").
        ProcessCollector(registry=self.metrics_registry)
        self._http: HttpServer | None = None
        self._parts: P | None = None
        self._started: set[str] = set()  # the names of the steps started

    @property
    def parts(self) -> P:
        """The parts this service runs (built by ``start``)."""
        if self._parts is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._parts

    @property
    def url(self) -> str:
        """The HTTP base URL (after ``start``)."""
        if self._http is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._http.url

    async def start(self) -> None:
        """Start; when that fails or is cancelled, release what was started and re-raise."""
        with bound(service=self.name):
            try:
                self.gc_pauses.install()
                self._resources.push_sync(self.gc_pauses.uninstall, name="gc pauses")
                await self._start()
            except BaseException:
                await self.stop()
                raise

    async def _start(self) -> None:
        raise NotImplementedError

    async def _open(self, given: Given, needs: Needs) -> Base:
        """``open_base`` on this service's resources, readiness and registry."""
        res, readiness, registry = self._resources, self.readiness, self.metrics_registry
        return await open_base(
            res, self.settings, given, needs, readiness=readiness, registry=registry
        )

    async def _start_parts(self, parts: P, steps: list[Step]) -> None:
        """Keep ``parts`` as ``self.parts`` and start ``steps`` (``start_steps``)."""
        self._parts = parts
        await start_steps(self._resources, self.readiness, steps, self._started)

    async def _listen(self, app: web.Application) -> None:
        """Serve ``app`` on the settings' ``http_host:http_port`` (stopped at close), ready."""
        s = self.settings
        self._http = await self._resources.serve(app, s.http_host, s.http_port)
        self.readiness.set_ready()
        structlog.get_logger(f"mowdeck.{self.name}").info(
            f"{self.name} listening", url=self._http.url
        )

    async def stop(self) -> None:
        """Refuse traffic, then release everything started, in reverse order."""
        with bound(service=self.name):
            self.readiness.set_not_ready(self.stopping_reason)
            await self._resources.close()
