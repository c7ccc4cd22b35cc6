"""Durable JetStream consumers with an explicit outcome per message: ack, nak(delay) or term."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import NotFoundError

from mowdeck.errors import MowdeckError
from mowdeck.kit.bus import Bus
from mowdeck.kit.logging import message_scope
from mowdeck.kit.wire import has_inline_status, is_fast, plain_headers, subscribe_direct

__all__ = [
    "Consumer",
    "ConsumerSpec",
    "DirectConsumer",
    "DropMessage",
    "Handler",
    "RetryLater",
    "delivery_count",
    "settle",
]

log = structlog.get_logger("mowdeck.consumer")

Handler = Callable[[Msg], Awaitable[None]]


class DropMessage(MowdeckError):
    """The message can never be handled: terminate it (no redelivery) and log why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RetryLater(MowdeckError):
    """The message cannot be handled now: redeliver it after ``delay`` seconds."""

    def __init__(self, reason: str, delay: float = 1.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


def delivery_count(msg: Msg) -> int:
    """How many times JetStream has delivered ``msg`` (1 on first delivery)."""
    try:
        return int(msg.metadata.num_delivered)
    except Exception:
        return 1


async def settle(msg: Msg, handler: Handler, *, consumer: str, error_delay: float = 2.0) -> str:
    """Run ``handler`` on ``msg`` and settle it; returns ``ack``, ``nak`` or ``term``.

    In a ``message_scope``: what the handler binds of the mower, command and account
    (``kit.logging.bind``) is on the settle's own line too, and unbound after it.
    """
    with message_scope():
        started = time.perf_counter()
        try:
            await handler(msg)
        except DropMessage as drop:
            await msg.term()
            log.warning(
                "message terminated", consumer=consumer, subject=msg.subject, reason=drop.reason
            )
            return "term"
        except RetryLater as retry:
            await msg.nak(delay=retry.delay)
            log.info(
                "message redelivery requested",
                consumer=consumer,
                subject=msg.subject,
                reason=retry.reason,
                delay=retry.delay,
            )
            return "nak"
        except Exception:
            # A bug or a transient failure: keep the message, retry it later, make noise.
            await msg.nak(delay=error_delay)
            log.exception("handler failed", consumer=consumer, subject=msg.subject)
            return "nak"
        await msg.ack()
        log.debug(
            "message handled",
            consumer=consumer,
            subject=msg.subject,
            ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return "ack"


class ConsumerSpec:
    """How to consume: stream, filter, durable name, optional queue group, limits."""

    def __init__(
        self,
        *,
        stream: str,
        subject: str,
        durable: str,
        queue: str | None = None,
        ack_wait: float = 30.0,
        max_deliver: int = -1,
        max_ack_pending: int = 20_000,
        deliver_policy: api.DeliverPolicy = api.DeliverPolicy.ALL,
        deliver_subject: str | None = None,
    ) -> None:
        # None: an inbox of the connection (its bus user's prefix). A durable that several
        # bus users share names a subject all of them may subscribe to instead.
        self.deliver_subject = deliver_subject
        self.stream = stream
        self.subject = subject
        self.durable = durable
        self.queue = queue
        self.ack_wait = ack_wait
        self.max_deliver = max_deliver
        self.max_ack_pending = max_ack_pending
        self.deliver_policy = deliver_policy

    def config(self) -> api.ConsumerConfig:
        """The durable consumer's JetStream configuration."""
        return api.ConsumerConfig(
            durable_name=self.durable,
            deliver_group=self.queue,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            max_deliver=self.max_deliver,
            max_ack_pending=self.max_ack_pending,
            deliver_policy=self.deliver_policy,
            filter_subject=self.subject,
            deliver_subject=self.deliver_subject,
        )


class Consumer:
    """A push subscription on a durable consumer that settles each message explicitly.

    ``on_message`` gets the raw message and settles it itself (use ``settle``), so a
    batching consumer can ack later. After ``stop()`` begins, arriving deliveries are
    nak'd at once so they are redelivered to whoever runs next.
    """

    def __init__(
        self,
        bus: Bus,
        spec: ConsumerSpec,
        on_message: Callable[[Msg], Awaitable[Any]],
        *,
        settles_while_closing: bool = False,
    ):
        """``settles_while_closing``: deliveries arriving after ``stop()`` began still go to
        ``on_message``, which settles them itself (the default naks them)."""
        self._bus = bus
        self.spec = spec
        self._on_message = on_message
        self._settles_while_closing = settles_while_closing
        self._sub: Any = None
        self._closing = False
        # Deliveries that arrived while closing, nak'd once the subscription is gone (see
        # ``stop``).
        self._given_back: list[Msg] = []

    async def start(self) -> None:
        """Create or bind the durable consumer and start receiving."""
        self._closing = False
        await self._reconcile()
        self._sub = await self._bus.js.subscribe(
            self.spec.subject,
            queue=self.spec.queue,
            durable=self.spec.durable,
            stream=self.spec.stream,
            config=self.spec.config(),
            manual_ack=True,
            cb=self._deliver,
        )

    @property
    def alive(self) -> bool:
        """False once the subscription's delivery loop has ended while it should run."""
        if self._sub is None:
            return False
        task = getattr(self._sub, "_wait_for_msgs_task", None)  # nats-py's delivery loop
        return task is None or not task.done()

    async def _reconcile(self) -> None:
        # Binding to an existing durable takes the server's configuration as it is: a
        # changed ack wait, limit or filter in the code would never reach a deployed
        # consumer.
        spec = self.spec
        self._bus.durables.add((spec.stream, spec.durable))
        try:
            info = await self._bus.js.consumer_info(spec.stream, spec.durable)
        except NotFoundError:
            return  # created with the spec's configuration by subscribe
        current = info.config
        wanted = {
            "ack_wait": spec.ack_wait,
            "max_ack_pending": spec.max_ack_pending,
            "max_deliver": spec.max_deliver,
        }
        # ack_wait travels in whole nanoseconds: a value such as 0.3 s comes back a hair
        # smaller, and must not look changed (and be written again) at every start.
        drift: dict[str, Any] = {
            k: v for k, v in wanted.items() if abs((getattr(current, k) or 0) - v) > 1e-6
        }
        # A durable created with another filter (the code chose a different one since)
        # would refuse the subscription: JetStream lets the filter change in place.
        if current.filter_subject != spec.subject and not current.filter_subjects:
            drift["filter_subject"] = spec.subject
        # Deliveries must reach a subject this connection may read: a durable made before
        # each bus user had its own inbox prefix (or by another user) delivers elsewhere.
        deliver = spec.deliver_subject or current.deliver_subject
        if spec.deliver_subject is None and not _own_inbox(self._bus, current.deliver_subject):
            deliver = self._bus.nc.new_inbox()
        if deliver != current.deliver_subject:
            drift["deliver_subject"] = deliver
        if not drift:
            return
        try:
            await self._bus.js.add_consumer(spec.stream, config=current.evolve(**drift))
        except Exception as err:
            log.warning(
                "consumer settings not updated", consumer=spec.durable, error=str(err), **drift
            )
            return
        log.info("consumer settings updated", consumer=spec.durable, **drift)

    async def _deliver(self, msg: Msg) -> None:
        if self._closing and not self._settles_while_closing:
            self._given_back.append(msg)
            return
        try:
            await self._on_message(msg)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the subscription itself is being stopped
            # Something the handler awaited was cancelled under it. nats-py would take the
            # CancelledError as the end of this subscription and stop delivering for good.
            log.error(
                "message handler was cancelled; the delivery is given back",
                consumer=self.spec.durable,
                subject=msg.subject,
            )
            with contextlib.suppress(Exception):
                await msg.nak(delay=1.0)

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop receiving; the durable consumer stays for the next start.

        The subscription is drained, not just unsubscribed: deliveries already on their
        way are still read, and given back (nak'd) once the subscription is gone, so they
        are redelivered at once instead of after ``ack_wait``. Not while it exists: a nak
        makes the server deliver again at once, to this same subscription, and a delivery
        on its way when the subscription goes waits out the ack wait.
        """
        self._closing = True
        if self._sub is not None:
            try:
                await asyncio.wait_for(self._sub.drain(), timeout)
            except Exception as err:
                log.warning("consumer drain failed", error=repr(err), consumer=self.spec.durable)
                with contextlib.suppress(Exception):
                    await self._sub.unsubscribe()
            self._sub = None
        given_back, self._given_back = self._given_back, []
        for msg in given_back:
            try:
                await msg.nak()
            except Exception as err:  # the connection went: the ack wait gives it back
                log.debug("nak failed", error=repr(err), consumer=self.spec.durable)


class DirectConsumer(Consumer):
    """A ``Consumer`` whose deliveries reach ``on_message`` as the connection reads them.

    nats-py hands each delivery of a callback subscription through a queue to a task that
    awaits the callback: an ``asyncio.Queue`` put and get and a coroutine per message,
    about 12 µs of the 2026-12-04 machine's CPU per delivery with its ack, against about
    9 µs read here (``tests/bench/deliveries.py``; ``docs/performance-log.md``, "Deliveries
    read directly"). On the fast client (``kit.wire.subscribe_direct``) the durable's
    deliver subject is subscribed directly and ``on_message`` is called on the read loop,
    in order, for a consumer whose callback only queues (``BatchLoop.take``): it must be
    quick and must not block. On nats-py's stock client it is an ordinary
    ``Consumer``. The durable asks for no idle heartbeats and no flow control, so every
    message but an inline status (dropped) is a delivery.

    Stopping drains the subscription: what the server sent before the drain's round trip
    is handed over, or, arriving while closing, given back (nak'd) once the subscription
    is gone, before ``stop`` returns (as ``Consumer.stop`` says).
    """

    def __init__(
        self,
        bus: Bus,
        spec: ConsumerSpec,
        on_message: Callable[[Msg], object],
        *,
        settles_while_closing: bool = False,
    ) -> None:
        async def queued(msg: Msg) -> None:
            on_message(msg)

        super().__init__(bus, spec, queued, settles_while_closing=settles_while_closing)
        self._take = on_message
        self._nc: Any = bus.nc

    async def start(self) -> None:
        """Create or bind the durable consumer and subscribe its deliver subject directly."""
        if not is_fast(self._bus.nc):
            await super().start()
            return
        self._closing = False
        await self._reconcile()
        spec, js = self.spec, self._bus.js
        try:
            info = await js.consumer_info(spec.stream, spec.durable)
        except NotFoundError:
            config = spec.config()
            if config.deliver_subject is None:
                config.deliver_subject = self._bus.nc.new_inbox()
            info = await js.add_consumer(spec.stream, config=config)
        deliver = info.config.deliver_subject
        if not deliver:
            raise RuntimeError(f"consumer {spec.durable} is not a push consumer")
        self._sub = await subscribe_direct(
            self._nc, deliver, self._on_raw, fallback=self._deliver, queue=spec.queue or ""
        )

    @property
    def alive(self) -> bool:
        """False once stopped or never started (a direct subscription has no task)."""
        if self._sub is None:
            return False
        return super().alive

    def _on_raw(self, subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        if hdr is not None and has_inline_status(hdr):
            log.debug("status message on a deliver subject dropped", consumer=self.spec.durable)
            return
        msg = Msg(
            _client=self._nc,
            subject=subject.decode(),
            reply=reply.decode(),
            data=data,
            headers=None if hdr is None else plain_headers(hdr),
        )
        if self._closing and not self._settles_while_closing:
            self._given_back.append(msg)
            return
        self._take(msg)


def _own_inbox(bus: Bus, subject: str | None) -> bool:
    """Whether ``subject`` is under the inbox prefix of ``bus``'s connection."""
    if subject is None:
        return True  # not a push consumer: nothing to deliver to
    prefix = bus.nc.new_inbox().rsplit(".", 1)[0]
    return subject.startswith(prefix + ".")
