"""The deny-list: users disabled or deleted by Identity, shared by every HTTP service.

The list lives in a JetStream key-value bucket (``MOWDECK_DENYLIST``; key: the user id in
base64url, value: a ``Denial``; entries expire after ``MOWDECK_DENYLIST_TTL_SECONDS``,
which must outlast any token). Its one writer is the recorder every ``JetStreamDenyList``
runs: a durable consumer (``denylist-recorder``, one queue group over all services) of
``identity.user.disabled`` / ``.deleted`` on the EVENTS stream. An event published while no
service runs is recorded when the first one starts. Each instance watches the bucket and
keeps the denied ids in memory, so a check is a set lookup. The bucket is made by the
admin step (``mowdeck streams``, ``create_denylist_bucket``) with the streams; a service
only binds to it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

import msgspec
import structlog
from nats.aio.msg import Msg
from nats.js.api import KeyValueConfig
from nats.js.errors import BadRequestError, BucketNotFoundError
from nats.js.kv import KeyValue

from contracts.v1 import UserRef, decode_event
from contracts.v1.subjects import EVENTS
from mowdeck.authn._settings import AuthSettings
from mowdeck.errors import MowdeckError
from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.bus import Bus
from mowdeck.kit.bus_permissions import DENYLIST_DELIVER
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DropMessage, RetryLater, settle

__all__ = [
    "USER_EVENTS",
    "Denial",
    "DenyList",
    "JetStreamDenyList",
    "MemoryDenyList",
    "create_denylist_bucket",
    "running_denylist",
]

log = structlog.get_logger("mowdeck.authn")

Reason = Literal["disabled", "deleted"]
USER_EVENTS: dict[str, Reason] = {
    "identity.user.disabled": "disabled",
    "identity.user.deleted": "deleted",
}
RECORDER = "denylist-recorder"


class Denial(msgspec.Struct, frozen=True, kw_only=True):
    """Why and since when a user is refused."""

    user_id: str
    reason: Reason
    at: datetime
    event_id: str | None = None


DenialCallback = Callable[[Denial], object]


class DenyList(Protocol):
    """Users whose tokens are refused whatever their signature says."""

    async def start(self, bus: Bus) -> None:
        """Load the list and follow it."""

    async def stop(self) -> None:
        """Stop following."""

    def is_denied(self, user_id: str) -> bool:
        """Whether ``user_id`` (a token's ``sub``) is refused."""

    def denial(self, user_id: str) -> Denial | None:
        """Why ``user_id`` is refused, or None when it is not."""

    def subscribe(self, callback: DenialCallback) -> Callable[[], None]:
        """Call ``callback`` for each user newly denied; returns the unsubscribe."""

    async def deny(self, denial: Denial) -> None:
        """Put a user on the list (for every instance)."""


class _Listeners:
    def __init__(self) -> None:
        self._callbacks: list[DenialCallback] = []

    def add(self, callback: DenialCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return remove

    def tell(self, denial: Denial) -> None:
        for callback in list(self._callbacks):
            try:
                callback(denial)
            except Exception:
                # One listener's bug must not keep the others from closing streams.
                log.exception("deny-list listener failed", user_id=denial.user_id)


class MemoryDenyList:
    """The deny-list of one process, for unit tests and single-process setups."""

    def __init__(self) -> None:
        self._denied: dict[str, Denial] = {}
        self._listeners = _Listeners()

    async def start(self, bus: Bus) -> None:
        """Nothing to load."""

    async def stop(self) -> None:
        """Nothing to stop."""

    def is_denied(self, user_id: str) -> bool:
        """Whether ``user_id`` is refused."""
        return user_id in self._denied

    def denial(self, user_id: str) -> Denial | None:
        """Why ``user_id`` is refused, or None."""
        return self._denied.get(user_id)

    def subscribe(self, callback: DenialCallback) -> Callable[[], None]:
        """Call ``callback`` for each user newly denied."""
        return self._listeners.add(callback)

    async def deny(self, denial: Denial) -> None:
        """Refuse ``denial.user_id`` from now on."""
        if denial.user_id not in self._denied:
            self._denied[denial.user_id] = denial
            self._listeners.tell(denial)

    def allow(self, user_id: str) -> None:
        """Take a user off the list (what deleting the bucket's key does)."""
        self._denied.pop(user_id, None)


def key_of(user_id: str) -> str:
    """The bucket key of a user id (any string; keys allow only a few characters)."""
    return base64.urlsafe_b64encode(user_id.encode()).decode().rstrip("=")


def user_of(key: str) -> str | None:
    """The user id of a bucket key, or None for a key that is not one."""
    try:
        return base64.urlsafe_b64decode(key + "=" * (-len(key) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


_denial_decoder = msgspec.json.Decoder(Denial)


class JetStreamDenyList:
    """The shared deny-list: a JetStream key-value bucket, watched; see the module doc."""

    def __init__(self, settings: AuthSettings, *, record: bool = True) -> None:
        """``record``: run the recorder of identity events (every service does)."""
        self._ttl = settings.denylist_ttl_seconds
        self._bucket = settings.denylist_bucket
        self._record = record
        self._denied: dict[str, Denial] = {}
        self._listeners = _Listeners()
        self._kv: KeyValue | None = None
        self._watcher: KeyValue.KeyWatcher | None = None
        self._task: asyncio.Task[None] | None = None
        self._recorder: Consumer | None = None

    async def start(self, bus: Bus) -> None:
        """Open the bucket, load it, follow it, and start the recorder."""
        self._kv = kv = await self._open(bus)
        self._watcher = watcher = await kv.watchall()
        loaded = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._follow(watcher, loaded), name="deny-list watch")
        await loaded
        log.info("deny-list loaded", bucket=self._bucket, denied=len(self._denied))
        if self._record:
            spec = ConsumerSpec(
                stream=EVENTS.name,
                subject="event.identity.user.*",
                durable=RECORDER,
                queue=RECORDER,
                max_ack_pending=1000,
                deliver_subject=DENYLIST_DELIVER,
            )
            self._recorder = Consumer(bus, spec, self._on_event)
            await self._recorder.start()

    async def _open(self, bus: Bus) -> KeyValue:
        try:
            return await bus.js.key_value(self._bucket)
        except BucketNotFoundError as err:
            raise DenyListMissingError(
                f"the deny-list bucket {self._bucket} does not exist: run `mowdeck streams`"
            ) from err

    async def _follow(self, watcher: KeyValue.KeyWatcher, loaded: asyncio.Future[None]) -> None:
        try:
            async for entry in watcher:
                if entry is None:
                    if not loaded.done():
                        loaded.set_result(None)
                    continue
                self._apply(entry)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.exception("deny-list watch ended")
            if not loaded.done():
                loaded.set_exception(err)

    def _apply(self, entry: KeyValue.Entry) -> None:
        user_id = user_of(entry.key)
        if user_id is None:
            return
        if entry.operation in ("DEL", "PURGE"):
            if self._denied.pop(user_id, None) is not None:
                log.info("user taken off the deny-list", user_id=user_id)
            return
        try:
            denial = _denial_decoder.decode(entry.value or b"")
        except msgspec.DecodeError:
            log.warning("deny-list entry not understood; refusing the user", user_id=user_id)
            denial = Denial(user_id=user_id, reason="disabled", at=datetime.now(UTC))
        self._remember(denial)

    def _remember(self, denial: Denial) -> None:
        if denial.user_id not in self._denied:
            self._denied[denial.user_id] = denial
            self._listeners.tell(denial)

    async def stop(self) -> None:
        """Stop the recorder and the watch."""
        if self._recorder is not None:
            await self._recorder.stop()
            self._recorder = None
        if self._watcher is not None:
            with contextlib.suppress(Exception):
                # nats-py leaves KeyWatcher.stop unannotated.
                await self._watcher.stop()  # type: ignore[no-untyped-call]
            self._watcher = None
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    @property
    def alive(self) -> bool:
        """False once the watch has ended while it should run."""
        return self._task is not None and not self._task.done()

    def is_denied(self, user_id: str) -> bool:
        """Whether ``user_id`` is refused (a set lookup)."""
        return user_id in self._denied

    def denial(self, user_id: str) -> Denial | None:
        """Why ``user_id`` is refused, or None (a dict lookup)."""
        return self._denied.get(user_id)

    def subscribe(self, callback: DenialCallback) -> Callable[[], None]:
        """Call ``callback`` for each user newly denied, from the watch."""
        return self._listeners.add(callback)

    async def deny(self, denial: Denial) -> None:
        """Write the user into the bucket; this instance refuses them at once."""
        if self._kv is None:
            raise RuntimeError("the deny-list is not started")
        await self._kv.put(key_of(denial.user_id), msgspec.json.encode(denial))
        self._remember(denial)

    async def _on_event(self, msg: Msg) -> None:
        await settle(msg, self._record_event, consumer=RECORDER)

    async def _record_event(self, msg: Msg) -> None:
        try:
            event = decode_event(msg.data, subject=msg.subject)
        except Exception as err:
            raise DropMessage(f"undecodable identity event: {err}") from err
        reason = USER_EVENTS.get(event.type)
        if reason is None or not isinstance(event.payload, UserRef):
            return
        if event.occurred_at < datetime.now(UTC) - timedelta(seconds=self._ttl):
            return  # every token of that time has expired
        denial = Denial(
            user_id=event.payload.user_id,
            reason=reason,
            at=event.occurred_at,
            event_id=str(event.id),
        )
        try:
            await self.deny(denial)
        except Exception as err:
            raise RetryLater(f"deny-list not written: {err}", delay=1.0) from err
        log.info("user put on the deny-list", user_id=denial.user_id, reason=denial.reason)


class DenyListMissingError(MowdeckError):
    """The deny-list's bucket was not made by the admin step."""


async def create_denylist_bucket(bus: Bus, settings: AuthSettings) -> str:
    """Make the deny-list's bucket (the admin step); ``created`` or ``unchanged``."""
    try:
        await bus.js.key_value(settings.denylist_bucket)
        return "unchanged"
    except BucketNotFoundError:
        pass
    config = KeyValueConfig(
        bucket=settings.denylist_bucket, ttl=settings.denylist_ttl_seconds, history=1
    )
    try:
        await bus.js.create_key_value(config)
    except BadRequestError as err:
        raise DenyListMissingError(f"cannot create {settings.denylist_bucket}: {err}") from err
    log.info("deny-list bucket created", bucket=settings.denylist_bucket)
    return "created"


@contextlib.asynccontextmanager
async def running_denylist(bus: Bus, settings: AuthSettings) -> AsyncIterator[JetStreamDenyList]:
    """A started ``JetStreamDenyList``, stopped on exit (for ``Resources.enter``)."""
    denylist = JetStreamDenyList(settings)
    await denylist.start(bus)
    try:
        yield denylist
    finally:
        await denylist.stop()
