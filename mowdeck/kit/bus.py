"""The bus: a NATS connection with JetStream, the streams from the contracts, publish helpers."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

import msgspec
import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError

from contracts.v1 import CommandEnvelope, CommandResult, EventEnvelope, MowerState, Struct, encode
from contracts.v1.subjects import STREAMS, StreamSpec
from mowdeck.kit import wire
from mowdeck.kit.bus_permissions import inbox_prefix
from mowdeck.kit.errors import BusError, ExpiredCommandError
from mowdeck.kit.publisher import Ack, Publisher, pub_ack
from mowdeck.kit.settings import BaseSettings
from mowdeck.kit.streams import Applied, merge, stream_config

__all__ = [
    "Bus",
    "BusError",
    "ExpiredCommandError",
    "NatsCredentials",
    "header",
    "seed_urls",
    "stream_config",
]

log = structlog.get_logger("mowdeck.bus")


def header(msg: Msg, name: str) -> str | None:
    """A header of a received message, or None.

    nats-py gives each value as a string, unless the optional ``fast_mail_parser`` package
    is installed, when it gives a list of strings; an emergency stop must be recognised
    either way.
    """
    headers = msg.headers
    if not headers:
        return None
    value: Any = headers.get(name)
    if isinstance(value, list):
        return str(value[0]) if value else None
    return value  # type: ignore[no-any-return]


class NatsCredentials(msgspec.Struct, frozen=True, kw_only=True):
    """Who a connection is: a user and password or an NKey seed file; a CA for TLS."""

    user: str | None = None
    password: str | None = None
    nkey_seed_file: str | None = None
    tls_ca_file: str | None = None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> NatsCredentials:
        """``MOWDECK_NATS_USER``/``_PASSWORD``/``_NKEY_SEED_FILE``/``_TLS_CA_FILE``."""
        return cls(
            user=settings.nats_user,
            password=settings.nats_password,
            nkey_seed_file=settings.nats_nkey_seed_file,
            tls_ca_file=settings.nats_tls_ca_file,
        )

    def options(self) -> dict[str, Any]:
        """nats-py's connect options for these credentials."""
        options: dict[str, Any] = {}
        if self.user is not None:
            options["user"] = self.user
            options["password"] = self.password or ""
        if self.nkey_seed_file is not None:
            options["nkeys_seed"] = self.nkey_seed_file  # nats-py needs the `nkeys` package
        if self.tls_ca_file is not None:
            options["tls"] = ssl.create_default_context(cafile=self.tls_ca_file)
        return options


class _Refusals:
    """Publishes and subscriptions the server refused (``Permissions Violation``)."""

    def __init__(self) -> None:
        self.count = 0


def seed_urls(url: str) -> list[str]:
    """The seed URLs of ``MOWDECK_NATS_URL``: one URL or a comma-separated list."""
    urls = [part.strip() for part in url.split(",") if part.strip()]
    if not urls:
        raise BusError("no NATS URL given")
    return urls


class Bus:
    """A connected NATS client with JetStream; one per service instance, passed down."""

    def __init__(self, nc: NATS, *, name: str, refusals: _Refusals | None = None) -> None:
        self.nc = nc
        self._refusals = refusals or _Refusals()
        self.js: JetStreamContext = nc.jetstream(publish_async_max_pending=20_000)
        self.name = name
        self._publisher: Publisher | None = None
        # (stream, durable) of every durable consumer started on this connection, for the
        # consumers' figures on /metrics (``kit/dependency_metrics.py``).
        self.durables: set[tuple[str, str]] = set()

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
        connect_timeout: float = 5.0,
        fast_path: bool = True,
        credentials: NatsCredentials | None = None,
        user: str | None = None,
    ) -> Bus:
        """Connect, retrying until NATS answers, then reconnecting for ever.

        Every failed attempt is logged (``nats error``) and a signal stops a service that
        is still waiting here (``run_services``); ``BusError`` only for what no retry
        mends, such as a malformed URL. ``fast_path`` (``MOWDECK_NATS_FAST_PATH``) picks
        the lean client of ``kit/wire.py``, which refuses an untested nats-py
        (``UntestedNatsPyError``) before connecting; off, nats-py's stock client. ``url``
        may list several seeds separated by commas (the nodes of a cluster): the client
        connects to one and fails over to the others, and to those the cluster announces.
        ``credentials`` name the service's own NATS user; what the server refuses it is
        logged (``nats permission refused``) and counted (``refused``). ``user`` is which
        bus user of ``kit/bus_permissions.py`` this connection is: its replies then arrive
        on that user's own inbox prefix, the only one its permissions let it read.
        """
        refusals = _Refusals()
        servers = seed_urls(url)

        async def _error(err: Exception) -> None:
            if "permissions violation" in str(err).lower():
                refusals.count += 1
                log.error("nats permission refused", error=str(err), client=name)
                return
            log.warning("nats error", error=str(err), client=name)

        async def _disconnected() -> None:
            log.warning("nats disconnected", client=name)

        async def _reconnected() -> None:
            log.info("nats reconnected", client=name)
            if on_reconnect is not None:
                await on_reconnect()

        # nats-py annotates its timeouts as int; they are seconds and may be fractions.
        options: dict[str, Any] = {
            "name": name,
            "connect_timeout": connect_timeout,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.5,
            "allow_reconnect": True,
            "error_cb": _error,
            "disconnected_cb": _disconnected,
            "reconnected_cb": _reconnected,
            "pending_size": 64 * 1024 * 1024,
            **(credentials.options() if credentials else {}),
        }
        if user is not None:
            options["inbox_prefix"] = inbox_prefix(user)
        nc = wire.new_client(fast_path=fast_path)
        try:
            await nc.connect(servers, **options)
        except Exception as err:
            raise BusError(f"cannot connect to NATS at {url}: {err}") from err
        return cls(nc, name=name, refusals=refusals)

    async def ensure_streams(
        self, specs: Iterable[StreamSpec] = STREAMS, *, replicas: int = 1
    ) -> list[Applied]:
        """Create the streams, or merge the contracts' limits into existing ones (idempotent).

        A new stream gets ``replicas`` (``MOWDECK_STREAM_REPLICAS``); an existing one keeps
        what an operator configured (``kit/streams.py``), and what was left alone is logged.
        """
        applied: list[Applied] = []
        for spec in specs:
            try:
                info = await self.js.stream_info(spec.name)
            except NotFoundError:
                try:
                    await self.js.add_stream(stream_config(spec, replicas=replicas))
                except BadRequestError as err:
                    raise BusError(f"cannot create stream {spec.name}: {err}") from err
                log.info("stream created", stream=spec.name, replicas=replicas)
                applied.append(Applied(stream=spec.name, action="created"))
                continue
            plan = merge(info.config, spec, replicas=replicas)
            if plan.kept:
                log.info("stream settings left alone", stream=spec.name, kept=list(plan.kept))
            if not plan.changed:
                applied.append(Applied(stream=spec.name, action="unchanged", kept=plan.kept))
                continue
            try:
                await self.js.update_stream(plan.config)
            except BadRequestError as err:
                raise BusError(f"cannot update stream {spec.name}: {err}") from err
            log.info("stream updated", stream=spec.name, changed=list(plan.changed))
            applied.append(
                Applied(stream=spec.name, action="updated", changed=plan.changed, kept=plan.kept)
            )
        return applied

    async def missing_streams(self, names: Iterable[str]) -> list[str]:
        """Those of the streams ``names`` that do not exist (yet) on the server."""
        missing: list[str] = []
        for name in names:
            try:
                await self.js.stream_info(name)
            except NotFoundError:
                missing.append(name)
            except nats.errors.TimeoutError as err:
                # A refused request is never answered: name the right that is lacking.
                raise BusError(
                    f"no answer to the info of stream {name}: may this user publish to"
                    f" $JS.API.STREAM.INFO.{name}? (refused so far: {self.refused})"
                ) from err
        return missing

    async def require_streams(
        self,
        names: Iterable[str],
        *,
        on_missing: Callable[[list[str]], Awaitable[None]] | None = None,
        every: float = 1.0,
    ) -> None:
        """Return once every stream of ``names`` exists; services never create them.

        Creating streams is the admin step (``mowdeck streams``). While one is missing,
        ``on_missing`` is told which (each time the answer changes), the wait is logged,
        and the streams are looked at again every ``every`` seconds.
        """
        wanted = list(names)
        reported: list[str] = []
        while missing := await self.missing_streams(wanted):
            if missing != reported:
                reported = missing
                log.warning(
                    "streams missing: run `mowdeck streams`", streams=missing, client=self.name
                )
                if on_missing is not None:
                    await on_missing(missing)
            await asyncio.sleep(every)
        if reported:
            log.info("streams found", streams=wanted, client=self.name)

    # Publishing goes through one ``Publisher`` (kit/publisher.py); these delegates are for
    # the occasional publish (tests, tools) that waits for its ack.

    @property
    def publisher(self) -> Publisher:
        """The bus's own publisher (acks bounded by ``ACK_DEADLINE_SECONDS``)."""
        if self._publisher is None:
            self._publisher = Publisher(self.nc)
        return self._publisher

    async def publish(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> api.PubAck:
        """Publish bytes with ``Nats-Msg-Id`` and wait for the stream's ack."""
        ack = await self.publisher.publish(subject, data, msg_id=msg_id, headers=headers)
        return pub_ack(await ack)

    async def publish_nowait(
        self, subject: str, data: bytes, *, msg_id: str, headers: dict[str, str] | None = None
    ) -> Ack:
        """Publish without waiting for the ack (many in flight); await the future for it."""
        return await self.publisher.publish(subject, data, msg_id=msg_id, headers=headers)

    async def publish_command(self, envelope: CommandEnvelope, *, now: datetime) -> api.PubAck:
        """Publish a command and wait for its ack; refuse an expired one."""
        return pub_ack(await (await self.publisher.command(envelope, now=now)))

    async def publish_result(self, result: CommandResult) -> api.PubAck:
        """Publish a command result and wait for its ack."""
        return pub_ack(await (await self.publisher.result(result)))

    async def publish_state(self, state: MowerState, *, msg_id: str) -> Ack:
        """Publish a mower state; await the future for its ack."""
        return await self.publisher.state(state, msg_id=msg_id)

    async def publish_event(self, event: EventEnvelope[Any]) -> api.PubAck:
        """Publish a domain event and wait for its ack."""
        return pub_ack(await (await self.publisher.event(event)))

    async def request(self, subject: str, message: Struct, *, timeout: float) -> bytes:
        """A core NATS request/reply; raises ``BusError`` on timeout or no responders."""
        try:
            reply = await self.nc.request(subject, encode(message), timeout=timeout)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as err:
            raise BusError(f"no answer on {subject}: {type(err).__name__}") from err
        return reply.data

    @property
    def refused(self) -> int:
        """How many publishes and subscriptions the server refused this connection."""
        return self._refusals.count

    @property
    def connected(self) -> bool:
        """True while the connection is up."""
        return bool(self.nc.is_connected)

    async def drain(self) -> None:
        """Flush what is pending and close the connection."""
        if self.nc.is_closed:
            return
        try:
            if self._publisher is not None:
                await self._publisher.wait_acked(timeout=5.0)
            await asyncio.wait_for(self.js.publish_async_completed(), timeout=5.0)
            await self.nc.drain()
        except Exception as err:
            # Closing must not fail the shutdown, even when the server is gone already.
            log.warning("nats drain failed", error=str(err))
            try:
                await self.nc.close()
            except Exception as close_err:
                log.warning("nats close failed", error=str(close_err))
