"""Fixtures: a migrated database per module, a pool and a store on clean tables per test."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from contracts.v1 import EventEnvelope, MowerRegistration, MowerState
from contracts.v1.fleet import Connection
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import InMemoryTupleStore, LocalAuthorizer
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from mowdeck.telemetry.service import TelemetryService
from mowdeck.telemetry.settings import TelemetrySettings
from tests.support.natsserver import NatsServer
from tests.support.settings import fast_path_from_environment
from tests.unit.telemetry.samples import T0

TABLES = "mower_latest, mower_history, mower_positions, command_timeline, mower_directory"


@pytest.fixture
async def migrated(database_url: str) -> str:
    """The module's database with the telemetry and authz migrations applied."""
    await migrate(database_url, discover(sql_root(), ["telemetry", "authz"]))
    return database_url


@pytest.fixture
async def pool(migrated: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool on emptied telemetry tables."""
    p = await asyncpg.create_pool(migrated, min_size=1, max_size=4)
    await p.execute(f"TRUNCATE {TABLES}")
    yield p
    await p.close()


@pytest.fixture
def pg_store(pool: asyncpg.Pool, migrated: str) -> PostgresTelemetryStore:
    """The PostgreSQL store."""
    return PostgresTelemetryStore(pool, migrated)


# -- services ------------------------------------------------------------------------


AUTH = AuthSettings(jwt_secret="telemetry-tests-secret-0123456789abcdef")


@pytest.fixture
def authorizer() -> LocalAuthorizer:
    """An in-process authorizer on in-memory tuples."""
    return LocalAuthorizer(InMemoryTupleStore())


@pytest.fixture
def issuer() -> TokenIssuer:
    """Mints tokens the services accept."""
    return TokenIssuer(AUTH)


ServiceFactory = Callable[..., Awaitable[TelemetryService]]


@pytest.fixture
async def make_service(
    nats_server: NatsServer,
    bus: Bus,
    pool: asyncpg.Pool,
    migrated: str,
    authorizer: LocalAuthorizer,
) -> AsyncIterator[ServiceFactory]:
    """Start replicas of Telemetry (each with its own NATS connection); all stop after."""
    started: list[TelemetryService] = []

    async def factory(**overrides: Any) -> TelemetryService:
        seed = overrides.pop("seed", False)
        clock = overrides.pop("clock", None)
        # A pool of the service's own, made from its settings (the test's pool otherwise).
        own_pool = overrides.pop("own_pool", False)
        values: dict[str, Any] = {
            "nats_url": nats_server.url,
            "nats_fast_path": fast_path_from_environment(),  # as a service would read it
            "database_url": migrated,
            "http_port": 0,
            "telemetry_batch_linger_ms": 5.0,
            "telemetry_unknown_mower_retry_seconds": 0.1,
            "telemetry_seed_timeout_seconds": 0.5,
        }
        values.update(overrides)
        service = TelemetryService(
            TelemetrySettings(**values),
            pool=None if own_pool else pool,
            authorizer=authorizer,
            verifier=TokenVerifier(AUTH),
            seed=seed,
            retention=False,
            **({"clock": clock} if clock else {}),
        )
        await service.start()
        started.append(service)
        return service

    yield factory
    for service in reversed(started):
        await service.stop()


async def publish_states(bus: Bus, states: list[MowerState]) -> None:
    """Publish states with fresh msg ids and wait for the stream's acks."""
    acks = [await bus.publish_state(s, msg_id=uuid.uuid4().hex) for s in states]
    await asyncio.gather(*acks)


def registration_event(
    kind: str, mower_id: uuid.UUID, account_id: uuid.UUID, seconds: float = 0
) -> EventEnvelope[MowerRegistration]:
    """A Fleet event about a mower."""
    return EventEnvelope.new(
        kind,
        MowerRegistration(
            mower_id=mower_id,
            account_id=account_id,
            name="m",
            connection=Connection(kind="simulator"),
        ),
        producer="fleet",
        now=T0 + timedelta(seconds=seconds),
        account_id=account_id,
    )


async def pending_acks(bus: Bus, durable: str, stream: str = "TELEMETRY") -> tuple[int, int]:
    """(ack pending, not yet delivered) of a durable consumer."""
    info = await bus.js.consumer_info(stream, durable)
    return info.num_ack_pending, info.num_pending
