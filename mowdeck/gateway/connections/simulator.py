"""The ``simulator`` connection: the device protocol over a WebSocket (docs/device-protocol.md).

Lean on purpose, since a gateway shard holds thousands: one reader task and a few fields
per connection, and one aiohttp ``ClientSession`` shared by all connections of an event
gateway (``ConnectionDeps.sessions``: it follows no redirect and requests nothing the
device hosts do not allow).

A silent link is found by ``_Heartbeat`` rather than aiohttp's own ``heartbeat=``, which
re-arms a timer through a loop callback for every message received (about 4 % of a
saturated shard's throughput): here a message sets a flag, and a timer per connection
looks at it once per ``heartbeat_seconds``. Nothing heard for a period: a ping; nothing
heard, not even the pong, for half a period more: the link is closed and reported down,
between 1.5 and 2.5 periods after the mower's last frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from typing import Annotated

import aiohttp
import msgspec
import structlog

from contracts.v1 import CommandEnvelope, MowerRegistration
from mowdeck.gateway.connections.device_session import RequestRefusedError
from mowdeck.gateway.connections.link_limits import FrameBudget, LinkViolation
from mowdeck.gateway.connections.port import (
    CommandOutcome,
    CommandTimeoutError,
    ConnectionDeps,
    ConnectionError,
    ConnectionEvents,
    LinkDownError,
    LinkLostError,
)
from mowdeck.kit.background import BackgroundTasks, cancel_and_wait
from simulator.protocol import (
    PROTOCOL_VERSION,
    CommandFrame,
    ErrorFrame,
    Hello,
    OutcomeFrame,
    ProtocolError,
    StateFrame,
    decode_device_frame,
    encode_frame,
)

__all__ = ["SimulatorConnection", "SimulatorOptions"]

log = structlog.get_logger("mowdeck.gateway.simulator")


class SimulatorOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``connection.options`` of kind ``simulator``; nothing secret belongs here.

    ``url`` is the option the kind declares as its device's (``devices.kinds.SIMULATOR``).

    The periods have lower bounds: a registration is anyone's with the account's admin
    role, and a heartbeat or reconnect every nanosecond would spin the shard's loop.
    """

    url: Annotated[str, msgspec.Meta(pattern=r"^wss?://")]
    heartbeat_seconds: Annotated[float, msgspec.Meta(ge=1, le=3600)] = 10.0
    connect_timeout_seconds: Annotated[float, msgspec.Meta(ge=0.5, le=300)] = 5.0
    backoff_initial_seconds: Annotated[float, msgspec.Meta(ge=0.05, le=300)] = 0.1
    backoff_max_seconds: Annotated[float, msgspec.Meta(ge=0.5, le=3600)] = 5.0

    def __post_init__(self) -> None:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must not be below backoff_initial_seconds")


class _Heartbeat:
    """Watches one open link: ``heard`` is set by the reader for every message received."""

    __slots__ = ("_background", "_period", "_pinged", "_timer", "_ws", "heard", "timed_out")

    def __init__(
        self, ws: aiohttp.ClientWebSocketResponse, period: float, background: BackgroundTasks
    ) -> None:
        self._ws = ws
        self._background = background  # the gateway's: its pings and closes under way
        self._period = period
        self._pinged = False
        self.heard = True
        self.timed_out = False
        self._timer = asyncio.get_running_loop().call_later(period, self._tick)

    def stop(self) -> None:
        """No more checks (the link ended)."""
        self._timer.cancel()

    def _tick(self) -> None:
        ws = self._ws
        if ws.closed:
            return
        loop = asyncio.get_running_loop()
        if self.heard:
            self.heard = self._pinged = False
            self._timer = loop.call_later(self._period, self._tick)
        elif not self._pinged:
            self._pinged = True
            self._background.spawn(self._ping())
            self._timer = loop.call_later(self._period / 2, self._tick)
        else:
            # The reader's receive sees the closing at once and ends the link; the close
            # handshake with a mower that no longer answers is left to its own timeout.
            self.timed_out = True
            self._background.spawn(self._close())

    async def _ping(self) -> None:
        with contextlib.suppress(OSError, aiohttp.ClientError, RuntimeError):
            await self._ws.ping()

    async def _close(self) -> None:
        with contextlib.suppress(OSError, aiohttp.ClientError, RuntimeError):
            await self._ws.close(code=aiohttp.WSCloseCode.GOING_AWAY)


class SimulatorConnection:
    """One mower over the device protocol; reconnects with jittered backoff until closed."""

    __slots__ = (
        "_closed",
        "_deps",
        "_events",
        "_log",
        "_pending",
        "_session",
        "_task",
        "_ws",
        "options",
        "registration",
    )

    def __init__(
        self,
        registration: MowerRegistration,
        events: ConnectionEvents,
        *,
        deps: ConnectionDeps,
    ) -> None:
        try:
            self.options = msgspec.convert(registration.connection.options, SimulatorOptions)
        except msgspec.ValidationError as err:
            raise ConnectionError(f"invalid simulator connection options: {err}") from err
        self.registration = registration
        self._events = events
        self._deps = deps
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: dict[uuid.UUID, asyncio.Future[CommandOutcome]] = {}
        self._closed = False
        self._log = log.bind(mower_id=str(registration.mower_id))

    @property
    def connected(self) -> bool:
        """True while the link is up (hello received)."""
        return self._ws is not None and not self._ws.closed

    async def open(self) -> None:
        """Start the reconnect loop in the background and return at once."""
        if self._task is None and not self._closed:
            self._session = self._deps.sessions.acquire()
            self._task = asyncio.create_task(
                self._run(), name=f"sim-link-{self.registration.mower_id}"
            )

    async def send(self, envelope: CommandEnvelope, *, timeout: float) -> CommandOutcome:
        """Send a command and wait for its outcome (see ``MowerConnection.send``)."""
        ws = self._ws
        if ws is None or ws.closed:
            raise LinkDownError(f"mower {self.registration.mower_id} is not connected")
        cid = envelope.command_id
        fut = self._pending.get(cid)
        if fut is not None:
            # The same command sent again while the first send waits: wait for the same
            # answer, with a deadline of its own that must not end the first wait.
            try:
                return await asyncio.wait_for(asyncio.shield(fut), timeout)
            except TimeoutError:
                raise self._timeout_error(timeout) from None
        loop = asyncio.get_running_loop()
        fut = self._pending[cid] = loop.create_future()
        frame = CommandFrame(
            command_id=cid, command=envelope.command, expires_at=envelope.expires_at
        )
        try:
            await ws.send_bytes(encode_frame(frame))
        except (OSError, aiohttp.ClientError, RuntimeError) as err:
            self._pending.pop(cid, None)
            # The link may have gone down meanwhile and failed the future already: this
            # error is the one reported, so that one is taken (not logged as never seen).
            if not fut.done():
                fut.cancel()
            elif not fut.cancelled():
                fut.exception()
            raise LinkDownError(f"link went down while sending: {err}") from err
        # One timer that fails the future, rather than ``wait_for(shield(...))``: that pair
        # costs three futures, a task and a timer per command, a tenth of the gateway's
        # CPU at full load.
        timer = loop.call_later(timeout, self._time_out, fut, timeout)
        try:
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(cid, None)

    def _time_out(self, fut: asyncio.Future[CommandOutcome], timeout: float) -> None:
        if not fut.done():
            fut.set_exception(self._timeout_error(timeout))

    def _timeout_error(self, timeout: float) -> CommandTimeoutError:
        return CommandTimeoutError(
            f"mower {self.registration.mower_id} did not answer within {timeout} s"
        )

    async def close(self) -> None:
        """Close the link for good and report it down."""
        self._closed = True
        if self._task is not None:
            await cancel_and_wait(self._task, name="device link")
            self._task = None
        if self._session is not None:
            await self._deps.sessions.release(self._session)
        self._session = None

    async def _run(self) -> None:
        opts = self.options
        delay = opts.backoff_initial_seconds
        while not self._closed:
            try:
                up = await self._connect_and_read()
            except asyncio.CancelledError:
                await self._link_down("closed")
                raise
            except Exception as err:
                # Whatever escaped (a callback, an unexpected aiohttp error) must not end
                # the link for good: report it down and reconnect like after any loss.
                self._log.exception("link failed; reconnecting")
                await self._link_down(f"link error: {err!r}")
                up = False
            if up:
                delay = opts.backoff_initial_seconds
            # Full jitter keeps thousands of mowers from reconnecting in lockstep.
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, opts.backoff_max_seconds)

    async def _connect_and_read(self) -> bool:
        assert self._session is not None
        opts = self.options
        try:
            async with asyncio.timeout(opts.connect_timeout_seconds):
                # Pings and pongs come to ``_read`` (autoping off): a pong is what a
                # silent mower answers ``_Heartbeat``'s ping with.
                ws = await self._session.ws_connect(
                    opts.url,
                    autoping=False,
                    max_msg_size=self._deps.limits.max_frame_bytes,
                    timeout=aiohttp.ClientWSTimeout(ws_close=opts.heartbeat_seconds),
                )
        except RequestRefusedError as err:
            # A redirect, or a host the device hosts do not allow: never followed, and
            # retried with backoff like any failed connect (the device may be mended).
            self._log.warning("device link refused", reason=str(err))
            return False
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            self._log.debug("connect failed", error=str(err))
            return False
        try:
            if not await self._handshake(ws, opts.connect_timeout_seconds):
                return False
            self._ws = ws
            self._events.on_link(True, None)
            heartbeat = _Heartbeat(ws, opts.heartbeat_seconds, self._deps.background)
            try:
                reason = await self._read(ws, heartbeat)
            except LinkViolation as violation:
                # Closed for what the device sent: dialled again only after the backoff
                # has grown, as after a failed connect (``False``).
                self._deps.violations.count(violation)
                self._log.warning("device link closed", reason=violation.reason)
                await ws.close(
                    code=aiohttp.WSCloseCode.POLICY_VIOLATION,
                    message=violation.reason.encode()[:120].decode(errors="ignore").encode(),
                )
                await self._link_down(violation.reason)
                return False
            finally:
                heartbeat.stop()
        finally:
            await ws.close()
        await self._link_down(reason)
        return True

    async def _handshake(self, ws: aiohttp.ClientWebSocketResponse, timeout: float) -> bool:
        try:
            msg = await ws.receive(timeout)
            if msg.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                raise ProtocolError(f"link closed before hello ({msg.type.name})")
            frame = decode_device_frame(msg.data)
        except (ProtocolError, TimeoutError) as err:
            self._log.warning("no valid hello", error=str(err))
            return False
        if not isinstance(frame, Hello):
            self._log.warning("expected hello", frame=type(frame).__name__)
            return False
        if frame.mower_id != self.registration.mower_id:
            self._log.warning("hello from another mower", other=str(frame.mower_id))
            return False
        if PROTOCOL_VERSION not in frame.protocols:
            self._log.warning("no common protocol version", offered=frame.protocols)
            return False
        return True

    async def _read(self, ws: aiohttp.ClientWebSocketResponse, heartbeat: _Heartbeat) -> str:
        data_types = (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY)
        loop = asyncio.get_running_loop()
        budget = FrameBudget(self._deps.limits, loop.time())
        async for msg in ws:
            heartbeat.heard = True
            if not budget.take(loop.time()):
                limits = self._deps.limits
                raise LinkViolation(
                    "flood",
                    f"more than {limits.frames_per_second:g} frames a second"
                    f" (burst {limits.frame_burst})",
                )
            if msg.type not in data_types:
                if msg.type is aiohttp.WSMsgType.PING:
                    await ws.pong(msg.data)
                    continue
                if msg.type is aiohttp.WSMsgType.PONG:
                    continue
                if isinstance(msg.data, aiohttp.WebSocketError):
                    raise self._broken_frame(msg.data)
                break
            try:
                frame = decode_device_frame(msg.data)
            except ProtocolError as err:
                raise LinkViolation("malformed_frame", err.reason[:200]) from None
            self._on_frame(frame)
        if heartbeat.timed_out:
            silent = 1.5 * self.options.heartbeat_seconds
            return f"link error: nothing from the mower for {silent:g} s, not even a pong"
        exc = ws.exception()
        if exc is not None:
            return f"link error: {exc}"
        extra = f": {ws.close_code}" if ws.close_code is not None else ""
        return f"link closed{extra}"

    def _broken_frame(self, err: aiohttp.WebSocketError) -> LinkViolation:
        # What aiohttp refused to read (it has closed the link already, with its code).
        if err.code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG:
            size = self._deps.limits.max_frame_bytes
            return LinkViolation("frame_too_large", f"a frame over {size} bytes")
        return LinkViolation("malformed_frame", str(err)[:200])

    def _on_frame(self, frame: object) -> None:
        reg = self.registration
        match frame:
            case StateFrame(state=state):
                if state.mower_id != reg.mower_id:
                    raise LinkViolation("foreign_mower", f"a state of mower {state.mower_id}")
                if state.account_id != reg.account_id:
                    # The registration, not the device, says who owns the mower.
                    state = msgspec.structs.replace(state, account_id=reg.account_id)
                self._events.on_state(state)
            case OutcomeFrame(command_id=cid, status=status, reason=reason):
                fut = self._pending.pop(cid, None)
                if fut is not None and not fut.done():
                    fut.set_result(CommandOutcome(status=status, reason=reason))
            case ErrorFrame(reason=reason, command_id=cid):
                self._log.warning("mower reported an error", reason=reason)
                fut = self._pending.pop(cid, None) if cid is not None else None
                if fut is not None and not fut.done():
                    fut.set_result(CommandOutcome(status="failed", reason=reason))
            case Hello(mower_id=other) if other != reg.mower_id:
                raise LinkViolation("foreign_mower", f"a hello of mower {other}")
            case _:
                pass  # a second hello of the same mower changes nothing

    async def _link_down(self, reason: str) -> None:
        was_up = self._ws is not None
        self._ws = None
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(LinkLostError(f"link lost before the mower answered: {reason}"))
        if was_up:
            self._events.on_link(False, reason)
