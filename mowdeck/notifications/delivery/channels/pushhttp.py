"""A small HTTP/1.1 client for push services: POST on kept-alive connections, nothing else.

Web Push sends one small POST per message to a handful of push service origins, so the
general client's per-request machinery (cookies, redirects, tracing, a stream reader per
response) costs more than the encryption. This client keeps one bounded pool of
connections per origin; a request is one write and one future its ``asyncio.Protocol``
completes, no task of its own. It follows no redirect, speaks no HTTP/2 and uses no
proxy.

SSRF: every new connection resolves its host with ``targets.resolve_public``, which
refuses non-public addresses (unless the host is exempt), and dials exactly the
addresses it accepted, so a name that is rebound after validation gets nowhere. The
channel checks every URL against the policy before it calls ``post``. TLS verifies the
certificate and the host name (``ssl.create_default_context()``, SNI).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import Mapping

from mowdeck.notifications.delivery.channels.pushwire import (
    CHUNKED,
    MAX_BODY,
    MAX_HEAD,
    UNTIL_CLOSE,
    Head,
    Origin,
    PushProtocolError,
    PushResponse,
    PushURL,
    ResponseHeaders,
    dechunk,
    parse_head,
    parse_push_url,
)
from mowdeck.notifications.delivery.targets import TargetPolicy, resolve_public

__all__ = [
    "PushClient",
    "PushProtocolError",
    "PushResponse",
    "PushURL",
    "ResponseHeaders",
    "parse_push_url",
]

# A connection idle for longer is closed rather than reused: servers drop idle ones too,
# and a request on a connection the server has just closed would be lost.
IDLE_SECONDS = 15.0


class _Connection(asyncio.Protocol):
    """One kept-alive connection: at most one request at a time, completed by callbacks."""

    def __init__(self, pool: _Pool) -> None:
        self._pool = pool
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[PushResponse] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._buffer = bytearray()
        self._head: Head | None = None
        self.reusable = True
        self.closed = False
        self.counted = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport."""
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def request(self, data: bytes, deadline: float) -> asyncio.Future[PushResponse]:
        """Send one request; the future completes with the answer or the failure."""
        assert self._transport is not None
        loop = self._pool.loop
        self._waiter = waiter = loop.create_future()
        if self.closed or self._transport.is_closing():
            # Closed since it was handed out: fail now rather than wait for the deadline.
            self._fail_waiter(ConnectionResetError("connection closed before the request"))
            return waiter
        self._buffer.clear()
        self._head = None
        self._transport.write(data)
        self._timer = loop.call_at(deadline, self._expire)
        return waiter

    def data_received(self, data: bytes) -> None:
        """Parse what arrived; complete the request when its answer is whole."""
        if self._waiter is None:
            self.abort()  # bytes nobody asked for: the connection is out of step
            return
        self._buffer += data
        try:
            self._parse()
        except PushProtocolError as err:
            self._fail(err)

    def _parse(self) -> None:
        buf = self._buffer
        while self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise PushProtocolError("answer head too large")
                return
            head = parse_head(bytes(buf[:end]))
            del buf[: end + 4]
            if head[0] >= 200:  # 1xx are interim answers: the final one follows
                self._head = head
        length = self._head[4]
        if length >= 0:
            if len(buf) >= length:
                if len(buf) > length:
                    self.reusable = False  # more than was announced
                self._complete(bytes(buf[:length]))
        elif length == CHUNKED:
            body = dechunk(buf)
            if body is not None:
                self._complete(body)
        elif len(buf) > MAX_BODY:
            raise PushProtocolError("answer body too large")

    def _complete(self, body: bytes) -> None:
        assert self._head is not None
        assert self._waiter is not None
        status, reason, headers, keep_alive, _ = self._head
        self.reusable = self.reusable and keep_alive
        waiter, self._waiter = self._waiter, None
        self._cancel_timer()
        if not waiter.done():
            waiter.set_result(PushResponse(status, reason, ResponseHeaders(headers), body))

    def _fail(self, err: BaseException) -> None:
        self._fail_waiter(err)
        self.abort()

    def _fail_waiter(self, err: BaseException) -> None:
        self._cancel_timer()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(err)

    def _expire(self) -> None:
        self._timer = None
        self._fail(TimeoutError())

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def eof_received(self) -> bool | None:
        """The server finished sending: the end of a body read until close."""
        if self._waiter is not None and self._head is not None and self._head[4] == UNTIL_CLOSE:
            self._complete(bytes(self._buffer))
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        """Fail a request still waiting (never retried) and leave the pool."""
        self._detach()
        if self._waiter is not None:
            if self._head is not None and self._head[4] == UNTIL_CLOSE:
                self._complete(bytes(self._buffer))
            else:
                err = ConnectionResetError("connection closed before the whole answer")
                err.__cause__ = exc
                self._fail_waiter(err)
        self._cancel_timer()

    def close(self) -> None:
        """Close gracefully (after a complete answer)."""
        if self.closed:
            return
        self._detach()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection at once (its state is unknown)."""
        if self.closed:
            return
        self._detach()
        if self._transport is not None:
            self._transport.abort()

    def _detach(self) -> None:
        if not self.closed:
            self.closed = True
            if self.counted:
                self._pool.lost(self)


class _Pool:
    """The connections to one origin: idle ones reused last-in first-out, at most ``limit``."""

    def __init__(self, client: PushClient, origin: Origin, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.origin = origin
        self.loop = loop
        self.idle: deque[_Connection] = deque()
        self.open = 0
        self.connects = 0
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()

    def take_idle(self) -> _Connection | None:
        """A kept-alive connection ready for a request, if there is one."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if self.loop.time() - conn.idle_since <= IDLE_SECONDS:
                return conn
            conn.close()
        return None

    async def acquire(self) -> _Connection:
        """An idle connection, a new one below the limit, or the next one released."""
        while True:
            conn = self.take_idle()
            if conn is not None:
                return conn
            if self.open < self.client.limit:
                break
            waiter: asyncio.Future[_Connection | None] = self.loop.create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    # Handed a connection or a slot just as we were cancelled: pass it on.
                    if (handed := waiter.result()) is not None:
                        self.release(handed)
                    else:
                        self._wake(None)
                raise
            if handed is not None and not handed.closed:
                return handed  # (one that closed while we woke up gave its slot back)
        self.open += 1
        try:
            conn = await self._connect()
        except BaseException:
            self.open -= 1
            self._wake(None)
            raise
        conn.counted = True  # from now on its closing gives the slot back
        return conn

    async def _connect(self) -> _Connection:
        host, port = self.origin.host, self.origin.port
        tls = self.client.ssl_context if self.origin.scheme == "https" else None
        # Every address is checked here, on every new connection, and only those are dialled.
        infos = await resolve_public(host, port, self.client.policy)
        failure: OSError = OSError(f"no address for {host}")
        for family, _type, proto, _canon, sockaddr in infos:
            try:
                _transport, conn = await self.loop.create_connection(
                    lambda: _Connection(self),
                    host=sockaddr[0],
                    port=sockaddr[1],
                    family=family,
                    proto=proto,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
            except OSError as err:
                failure = err
                continue
            self.connects += 1
            return conn
        raise failure

    def release(self, conn: _Connection) -> None:
        """Give a connection with a complete answer back (to a waiter first)."""
        if conn.closed:
            return
        if not conn.reusable or self.client.closed:
            conn.close()
            return
        conn.idle_since = self.loop.time()
        if not self._wake(conn):
            self.idle.append(conn)

    def lost(self, conn: _Connection) -> None:
        """A connection closed: it no longer counts, a waiter may open another."""
        self.open -= 1
        with contextlib.suppress(ValueError):
            self.idle.remove(conn)
        self._wake(None)

    def _wake(self, conn: _Connection | None) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False

    def close(self) -> None:
        """Close the idle connections; busy ones close when their request ends."""
        while self.idle:
            self.idle.pop().abort()


class PushClient:
    """POSTs to push services over kept-alive HTTP/1.1 connections, one pool per origin."""

    def __init__(
        self,
        policy: TargetPolicy,
        *,
        limit: int = 100,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.policy = policy
        self.limit = limit
        # The system's trust store and host name checks, as aiohttp's default.
        self.ssl_context = ssl_context or ssl.create_default_context()
        self._pools: dict[Origin, _Pool] = {}
        self.closed = False

    @property
    def connects(self) -> int:
        """Connections opened so far (all origins)."""
        return sum(pool.connects for pool in self._pools.values())

    @property
    def open_connections(self) -> int:
        """Connections open now, busy or idle (all origins)."""
        return sum(pool.open for pool in self._pools.values())

    async def post(
        self, url: PushURL, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> PushResponse:
        """POST ``body`` once within ``timeout`` s in all; OSError or TimeoutError if not.

        Never retried here, not even on a kept-alive connection the server has just
        closed: the delivery worker retries with backoff.
        """
        if self.closed:
            raise ConnectionError("push client closed")
        head = [f"POST {url.target} HTTP/1.1\r\nHost: {url.host_header}\r\n"]
        for name, value in headers.items():
            if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
                raise ValueError(f"header {name} contains a line break")
            head.append(f"{name}: {value}\r\n")
        head.append(f"Content-Length: {len(body)}\r\n\r\n")
        data = "".join(head).encode("latin-1") + body
        pool = self._pools.get(url.origin)
        if pool is None:
            pool = self._pools[url.origin] = _Pool(self, url.origin, asyncio.get_running_loop())
        deadline = pool.loop.time() + timeout
        conn = pool.take_idle()
        if conn is None:
            async with asyncio.timeout_at(deadline):
                conn = await pool.acquire()
        try:
            response = await conn.request(data, deadline)
        except BaseException:
            conn.abort()
            raise
        pool.release(conn)
        return response

    async def close(self) -> None:
        """Close every idle connection; no request may start afterwards."""
        self.closed = True
        for pool in self._pools.values():
            pool.close()
