"""The emergency lane: every stop as it is published, on a thread of its own.

The gateway's event loop also carries every ordinary command, result, state and device
frame; at full load one turn of it lasts tens to hundreds of milliseconds. A stop that
waits for the loop to read it, then for a task to send it, waits for those turns. So the
lane reads the stops' announcements (``emergency.mower.*``: the kit's publisher sends a
stop there as well as to the stream, amendment 2 to ADR 0013) on a NATS connection and
an event loop of its own, in a thread that the interpreter switches to within its switch
interval, admits a stop there (admission is pure and only reads the shard's mowers), and
puts the device send at the front of the main loop's queue (``call_first_threadsafe``),
where it runs as soon as the callback running now returns. Only the header is looked at
before deciding.

A stop's time is also the time its threads wait for a core: with every core busy, a
thread that wakes waits for a time slice, and the lane's thread wakes for every stop.
With ``realtime_priority`` the lane's thread runs ``SCHED_FIFO`` (``kit.loop_scheduling.
run_realtime``): it runs as soon as it wakes. It sleeps nearly all the time and does
little when woken (admission of a stop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable

import structlog
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.loop_scheduling import run_realtime
from mowdeck.kit.wire import has_inline_status, plain_headers, round_trip, subscribe_direct

__all__ = ["EmergencyLane"]

log = structlog.get_logger("mowdeck.gateway")


class EmergencyLane:
    """A NATS subscription served by its own thread and event loop.

    ``handle`` is called on the lane's thread for every message whose header block
    contains ``marker`` (every message when it is None); it must be quick and must not
    touch the main loop's objects except through thread-safe calls. The marker is a
    pre-filter on the raw bytes: ``handle`` still reads the header and decides.
    ``fast_path`` is ``Bus.connect``'s: with it off the lane's connection is nats-py's
    stock client, whose messages come as ``Msg`` and are filtered on their parsed headers.
    ``realtime_priority`` (1-99; 0 for ordinary scheduling): the thread's ``SCHED_FIFO``
    priority. Where the process may not have it, the lane runs ordinarily scheduled and
    says so in the log; ``realtime`` tells which it got.
    """

    def __init__(
        self,
        nats_url: str,
        *,
        name: str,
        subject: str,
        handle: Callable[[Msg], None],
        marker: bytes | None = None,
        fast_path: bool = True,
        credentials: NatsCredentials | None = None,
        realtime_priority: int = 0,
    ) -> None:
        self._url = nats_url
        self._realtime_priority = realtime_priority
        # True once the thread runs SCHED_FIFO (set on the thread before start returns).
        self.realtime = False
        self._fast_path = fast_path
        self._credentials = credentials
        self._name = name
        self._subject = subject
        self._handle = handle
        self._marker = marker
        self._marker_text = None if marker is None else marker.decode()
        # The lane's own connection, once started (set on its thread before start returns).
        self.nc: NATS | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()

    async def start(self) -> None:
        """Start the thread; return once the subscription is in place (or raise)."""
        # In a copy of this context (a thread starts with an empty one): the lane logs as
        # the service that started it.
        run = contextvars.copy_context().run
        self._thread = threading.Thread(target=run, args=(self._run,), name=self._name, daemon=True)
        self._thread.start()
        await asyncio.wrap_future(self._ready)

    @property
    def alive(self) -> bool:
        """True while the lane's thread runs."""
        return self._thread is not None and self._thread.is_alive()

    async def stop(self) -> None:
        """Drain the lane's connection and end its thread."""
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10.0)
            self._thread = None

    def _run(self) -> None:
        if self._realtime_priority:
            refused = run_realtime(self._realtime_priority)
            self.realtime = refused is None
            if refused is not None:
                log.warning(
                    "emergency lane runs at ordinary priority: its stops wait for a core"
                    " like every other thread when all are busy",
                    reason=refused,
                    setting="MOWDECK_GATEWAY_LANE_REALTIME_PRIORITY",
                )
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        bus: Bus | None = None
        try:
            bus = await Bus.connect(
                self._url,
                name=self._name,
                fast_path=self._fast_path,
                credentials=self._credentials,
                user="gateway",
            )
            self.nc = bus.nc
            await subscribe_direct(bus.nc, self._subject, self._on_raw, fallback=self._on_message)
            await round_trip(bus.nc)  # ready once the server has the subscription, not before
        except BaseException as err:
            if bus is not None:  # connected, then failed: the connection is not left open
                with contextlib.suppress(Exception):
                    await bus.nc.close()
            self._ready.set_exception(err)
            return
        self._ready.set_result(None)
        await self._stop.wait()
        await bus.drain()

    def _on_raw(self, subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        marker = self._marker
        if marker is not None and (hdr is None or marker not in hdr):
            return
        if hdr is not None and has_inline_status(hdr):
            return  # an inline status comes from the server, never from a publisher
        headers = None if hdr is None else plain_headers(hdr)
        msg = Msg(
            _client=None,  # type: ignore[arg-type] # never settled: core messages, read only
            subject=subject.decode(),
            reply=reply.decode(),
            data=data,
            headers=headers,
        )
        try:
            self._handle(msg)
        except Exception:
            log.exception("emergency lane failed on a message", subject=msg.subject)

    async def _on_message(self, msg: Msg) -> None:
        text = self._marker_text
        if text is not None and not any(
            text in name or text in str(value) for name, value in (msg.headers or {}).items()
        ):
            return
        try:
            self._handle(msg)
        except Exception:
            log.exception("emergency lane failed on a message", subject=msg.subject)
