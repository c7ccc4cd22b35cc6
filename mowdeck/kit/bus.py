"""The bus: a NATS connection with JetStream, the streams from the contracts, publish helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any

import nats
import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.errors import BadRequestError, NotFoundError

from contracts.v1 import CommandEnvelope, CommandResult, EventEnvelope, MowerState, Struct, encode
from contracts.v1.subjects import STREAMS, StreamSpec
from mowdeck.kit import wire
from mowdeck.kit.errors import BusError, ExpiredCommandError
from mowdeck.kit.publisher import Ack, Publisher, pub_ack

__all__ = ["Bus", "BusError", "ExpiredCommandError", "header", "stream_config"]

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


def stream_config(spec: StreamSpec) -> api.StreamConfig:
    """The JetStream configuration of a stream spec."""
    return api.StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        duplicate_window=spec.duplicate_window_s,
        max_age=spec.max_age_s,
        max_msgs_per_subject=spec.max_msgs_per_subject,
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.LIMITS,
    )


class Bus:
    """A connected NATS client with JetStream; one per service instance, passed down."""

    def __init__(self, nc: NATS, *, name: str) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(publish_async_max_pending=20_000)
        self.name = name
        self._publisher: Publisher | None = None

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        name: str,
        on_reconnect: Callable[[], Awaitable[None]] | None = None,
        connect_timeout: float = 5.0,
        fast_path: bool = True,
    ) -> Bus:
        """Connect, retrying until NATS answers, then reconnecting for ever.

        Every failed attempt is logged (``nats error``) and a signal stops a service that
        is still waiting here (``run_services``); ``BusError`` only for what no retry
        mends, such as a malformed URL. ``fast_path`` (``MOWDECK_NATS_FAST_PATH``) picks
        the lean client of ``kit/wire.py``, which refuses an untested nats-py
        (``UntestedNatsPyError``) before connecting; off, nats-py's stock client.
        """

        async def _error(err: Exception) -> None:
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
        }
        nc = wire.new_client(fast_path=fast_path)
        try:
            await nc.connect(url, **options)
        except Exception as err:
            raise BusError(f"cannot connect to NATS at {url}: {err}") from err
        return cls(nc, name=name)

    async def ensure_streams(self, specs: Iterable[StreamSpec] = STREAMS) -> None:
        """Create or update the streams (idempotent; limits come from the contracts)."""
        for spec in specs:
            config = stream_config(spec)
            try:
                await self.js.stream_info(spec.name)
            except NotFoundError:
                try:
                    await self.js.add_stream(config)
                except BadRequestError as err:
                    raise BusError(f"cannot create stream {spec.name}: {err}") from err
                log.info("stream created", stream=spec.name)
                continue
            try:
                await self.js.update_stream(config)
            except BadRequestError as err:
                raise BusError(f"cannot update stream {spec.name}: {err}") from err

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
