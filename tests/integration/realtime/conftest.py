"""Fixtures: Realtime replicas on the test NATS server, tokens, grants and stream readers."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import msgspec
import pytest

from contracts.v1 import (
    CommandResult,
    EventEnvelope,
    MowerLink,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    decode,
    encode,
)
from contracts.v1.fleet import Connection
from contracts.v1.subjects import FLEET_MOWERS_LIST
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import (
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.kit.bus import Bus
from mowdeck.realtime.console import CodeExchange
from mowdeck.realtime.service import RealtimeService
from mowdeck.realtime.settings import RealtimeSettings
from mowdeck.realtime.stale import LatestStates, MemoryLatestStates
from tests.support.natsserver import NatsServer

AUTH = AuthSettings(jwt_secret="realtime-tests-secret-0123456789abcdef")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000a1")
OTHER = uuid.UUID("00000000-0000-4000-8000-0000000000b2")
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")
SECOND = uuid.UUID("00000000-0000-4000-8000-000000000002")
FOREIGN = uuid.UUID("00000000-0000-4000-8000-000000000009")  # OTHER's mower


def now() -> datetime:
    """The current UTC time."""
    return datetime.now(UTC)


@pytest.fixture
async def authorizer() -> LocalAuthorizer:
    """Alice is a viewer of ACCOUNT (MOWER, SECOND), carol an admin of OTHER (FOREIGN)."""
    authz = LocalAuthorizer(InMemoryTupleStore())
    await authz.write(
        [
            *grant_tuples(ACCOUNT, "alice", "viewer"),
            *grant_tuples(ACCOUNT, "bob", "viewer"),
            *grant_tuples(OTHER, "carol", "admin"),
            Tuple(account_object(ACCOUNT), "account", mower_object(MOWER)),
            Tuple(account_object(ACCOUNT), "account", mower_object(SECOND)),
            Tuple(account_object(OTHER), "account", mower_object(FOREIGN)),
        ]
    )
    return authz


def registration(mower_id: uuid.UUID, account_id: uuid.UUID) -> MowerRegistration:
    """A mower as Fleet registers it."""
    return MowerRegistration(
        mower_id=mower_id, account_id=account_id, name="m", connection=Connection(kind="simulator")
    )


@pytest.fixture
def fleet_mowers() -> dict[uuid.UUID, uuid.UUID]:
    """The mowers Fleet lists, by id: their accounts (a test may change them first)."""
    return {MOWER: ACCOUNT, SECOND: ACCOUNT, FOREIGN: OTHER}


@pytest.fixture
async def fleet(bus: Bus, fleet_mowers: dict[uuid.UUID, uuid.UUID]) -> AsyncIterator[None]:
    """Answers ``fleet.mowers.list`` as Fleet does, with ``fleet_mowers``."""

    async def answer(msg: Any) -> None:
        request = decode(msg.data, MowerListRequest)
        listed = [registration(m, a) for m, a in fleet_mowers.items()]
        await msg.respond(encode(request.answer(listed)))

    sub = await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=answer)
    await bus.nc.flush()
    yield
    await sub.unsubscribe()


@pytest.fixture
def issuer() -> TokenIssuer:
    """Mints tokens the service accepts."""
    return TokenIssuer(AUTH)


@pytest.fixture
def latest_states() -> MemoryLatestStates:
    """Telemetry's latest states as the snapshot's fallback sees them."""
    return MemoryLatestStates()


ServiceFactory = Callable[..., Awaitable[RealtimeService]]


@pytest.fixture
async def make_service(
    nats_server: NatsServer,
    bus: Bus,
    authorizer: LocalAuthorizer,
    latest_states: MemoryLatestStates,
    fleet: None,
) -> AsyncIterator[ServiceFactory]:
    """Start replicas (each with its own NATS connection), each once it has Fleet's list of
    mowers; all stop after the test."""
    started: list[RealtimeService] = []

    async def factory(
        states: LatestStates | None = None,
        console_codes: CodeExchange | None = None,
        **overrides: Any,
    ) -> RealtimeService:
        values: dict[str, Any] = {"nats_url": nats_server.url, "http_port": 0}
        values.update(overrides)
        service = RealtimeService(
            RealtimeSettings(**values),
            auth_settings=AUTH,
            authorizer=authorizer,
            verifier=TokenVerifier(AUTH),
            states=states or latest_states,
            console_codes=console_codes,
        )
        await service.start()
        started.append(service)
        await asyncio.wait_for(service.parts.seed.seeded.wait(), 5)
        return service

    yield factory
    for service in reversed(started):
        await service.stop()


class Event(msgspec.Struct):
    """One event as a client read it."""

    type: str
    id: str
    data: Any


class SseReader:
    """Reads a Server-Sent Events response into events."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.events: asyncio.Queue[Event | None] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            async for raw in self.response.content:
                line = raw.decode().rstrip("\n")
                if not line:
                    if fields:
                        data = fields.get("data", "null")
                        event = Event(fields.get("event", "message"), fields.get("id", ""), None)
                        event.data = msgspec.json.decode(data)
                        await self.events.put(event)
                    fields = {}
                    continue
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        except (aiohttp.ClientError, asyncio.CancelledError):
            pass
        finally:
            await self.events.put(None)

    async def next(self, *, skip: tuple[str, ...] = ("heartbeat",), timeout: float = 5.0) -> Event:
        """The next event not of a ``skip`` type; fails when the stream ended or went quiet."""
        while True:
            event = await asyncio.wait_for(self.events.get(), timeout)
            assert event is not None, "the stream ended"
            if event.type not in skip:
                return event

    async def ended(self, timeout: float = 5.0) -> list[Event]:
        """The events up to the end of the stream."""
        seen: list[Event] = []
        while True:
            event = await asyncio.wait_for(self.events.get(), timeout)
            if event is None:
                return seen
            seen.append(event)

    async def close(self) -> None:
        """Stop reading and close the response."""
        self.response.close()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client session."""
    async with aiohttp.ClientSession() as session:
        yield session


Opener = Callable[..., Awaitable[SseReader]]


@pytest.fixture
async def open_stream(http: aiohttp.ClientSession, issuer: TokenIssuer) -> AsyncIterator[Opener]:
    """Open ``/v1/stream`` as a user (bearer token); every stream is closed after the test."""
    readers: list[SseReader] = []

    async def opener(
        service: RealtimeService,
        user: str = "alice",
        account: uuid.UUID = ACCOUNT,
        *,
        query: str = "",
        headers: dict[str, str] | None = None,
    ) -> SseReader:
        token = issuer.mint(user, account)
        response = await http.get(
            f"{service.url}/v1/stream{query}",
            headers={"Authorization": f"Bearer {token}", **(headers or {})},
        )
        assert response.status == 200, await response.text()
        reader = SseReader(response)
        readers.append(reader)
        return reader

    yield opener
    for reader in readers:
        await reader.close()


def state(
    mower_id: uuid.UUID = MOWER, account_id: uuid.UUID = ACCOUNT, **fields: Any
) -> MowerState:
    """A fresh state of a mower."""
    values: dict[str, Any] = {"activity": "mowing", "battery": 80}
    values.update(fields)
    return MowerState(mower_id=mower_id, account_id=account_id, observed_at=now(), **values)


async def publish_state(bus: Bus, s: MowerState) -> None:
    """Publish a state and wait for the stream's ack."""
    await (await bus.publish_state(s, msg_id=uuid.uuid4().hex))


async def publish_result(
    bus: Bus, mower_id: uuid.UUID = MOWER, status: str = "accepted"
) -> uuid.UUID:
    """Publish a command result; returns its command id."""
    command_id = uuid.uuid4()
    await bus.publish_result(
        CommandResult(command_id=command_id, mower_id=mower_id, status=status, at=now())  # type: ignore[arg-type]
    )
    return command_id


async def publish_link(bus: Bus, mower_id: uuid.UUID = MOWER, *, connected: bool = True) -> None:
    """Publish ``mower.connected`` or ``mower.disconnected``."""
    kind = "mower.connected" if connected else "mower.disconnected"
    await bus.publish_event(
        EventEnvelope.new(kind, MowerLink(mower_id=mower_id), producer="gateway", now=now())
    )
