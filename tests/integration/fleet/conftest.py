"""Fleet on real NATS and PostgreSQL: a migrated database, a running service, API clients."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from mowdeck.authn import AuthSettings, TokenIssuer
from mowdeck.authz import Authorizer, LocalAuthorizer, PostgresTupleStore
from mowdeck.devices.kinds import (
    AUTOMOWER,
    OPENMOWER,
    SIMULATOR,
    ConnectionKind,
    ConnectionKinds,
)
from mowdeck.fleet import FleetService, FleetSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root

AUTH = AuthSettings(jwt_secret="fleet-tests-secret-of-at-least-32-bytes!")
KINDS = ConnectionKinds([SIMULATOR, OPENMOWER, AUTOMOWER, ConnectionKind("mqtt")])


@pytest.fixture(scope="module")
def fleet_db(database_url: str) -> str:
    """The module's database with the fleet and authz migrations applied."""
    import asyncio  # noqa: PLC0415

    asyncio.run(migrate(database_url, discover(sql_root(), ["fleet", "authz"])))
    return database_url


@pytest.fixture
async def pool(fleet_db: str) -> AsyncIterator[asyncpg.Pool]:
    """A connection pool on the migrated database."""
    p = await asyncpg.create_pool(fleet_db, min_size=1, max_size=8)
    yield p
    await p.close()


@pytest.fixture
def authorizer(pool: asyncpg.Pool) -> Authorizer:
    """The in-process evaluator over the tuples in PostgreSQL."""
    return LocalAuthorizer(PostgresTupleStore(pool))


def settings(**changes: Any) -> FleetSettings:
    """Fleet settings for tests: any free port, quick polls."""
    values: dict[str, Any] = {
        "http_port": 0,
        "fleet_events_relay_poll_seconds": 0.2,
        "fleet_recorder_flush_seconds": 0.01,
        "command_max_wait_seconds": 10.0,
        "gateway_device_hosts": ["127.0.0.1"],
    }
    values.update(changes)
    return FleetSettings(**values)


async def start_fleet(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer, **changes: Any
) -> FleetService:
    """A started Fleet sharing the test's bus, pool and authorizer."""
    service = FleetService(
        settings(**changes),
        auth_settings=AUTH,
        bus=bus,
        pool=pool,
        authorizer=authorizer,
        connection_kinds=KINDS,
    )
    await service.start()
    return service


@pytest.fixture
async def fleet(
    bus: Bus, pool: asyncpg.Pool, authorizer: Authorizer
) -> AsyncIterator[FleetService]:
    """A running Fleet."""
    service = await start_fleet(bus, pool, authorizer)
    yield service
    await service.stop()


class Api:
    """An HTTP client of Fleet acting as one user."""

    def __init__(self, http: aiohttp.ClientSession, base: str, user: str, account: uuid.UUID):
        self.http = http
        self.base = base
        self.user = user
        self.account = account
        token = TokenIssuer(AUTH).mint(user, account)
        self.headers = {"Authorization": f"Bearer {token}"}

    async def call(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None, **kw: Any
    ) -> tuple[int, Any]:
        """Send a request; returns the status and the decoded JSON body (or None)."""
        headers = dict(self.headers)
        data: bytes | None = raw
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        headers.update(kw.pop("headers", {}))
        async with self.http.request(
            method, self.base + path, data=data, headers=headers, **kw
        ) as r:
            text = await r.read()
            doc = None
            if text and r.content_type in ("application/json", "application/problem+json"):
                doc = await r.json(content_type=None)
            return r.status, doc


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session."""
    async with aiohttp.ClientSession() as session:
        yield session
