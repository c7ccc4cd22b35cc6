"""The fan-out: one live subscription per stream for the whole process, an index by mower.

Each stream is read by one ordered consumer (no acks, no durable state); its metadata
gives the stream sequence, which becomes the hub's position in that stream. An event's id
is the position triple when the hub dispatched it, and every client's buffer keeps the
hub's order: the id a client read last is where it resumes. TELEMETRY is read from the
last message of every subject on, so the hub knows the latest state of every mower the
stream still holds: connecting clients get their snapshot from it, not from the bus.

Every frame goes to the streams of one account only: a state to the account it names
(none when Fleet names another), any other event to the account its mower belongs to
(``accounts.py``); a mower of no known account reaches no stream.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Any

import msgspec
import structlog
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext

from contracts.v1 import GrantsChanged, MowerRegistration
from contracts.v1.subjects import COMMANDS, EVENTS, TELEMETRY
from mowdeck.authn import Denial, DenyList
from mowdeck.kit.wire import delivery
from mowdeck.realtime.accounts import Move, MowerDirectory, scoped
from mowdeck.realtime.client import Client, close_data
from mowdeck.realtime.frames import Frame, frame
from mowdeck.realtime.groups import Groups
from mowdeck.realtime.metrics import RealtimeMetrics
from mowdeck.realtime.positions import Position, format_position
from mowdeck.realtime.translate import (
    Item,
    alarm_item,
    command_item,
    event_item,
    link_item,
    notification_item,
    state_item,
)

__all__ = ["Hub"]

log = structlog.get_logger("mowdeck.realtime.hub")

RefreshRequest = Callable[[Iterable[Client] | None], None]


class Hub:
    """Live subscriptions, the latest states, and the clients indexed by mower and user."""

    def __init__(self, js: JetStreamContext, metrics: RealtimeMetrics, denylist: DenyList) -> None:
        self._js = js
        self._denylist = denylist
        self._unsubscribe_denials: Callable[[], None] | None = None
        self.metrics = metrics
        self._t = self._c = self._e = 0
        self.mowers = MowerDirectory()  # the latest states and the accounts
        self.clients: set[Client] = set()
        self._groups = Groups()
        self._by_user: dict[str, set[Client]] = {}
        self._by_account: dict[uuid.UUID, set[Client]] = {}
        self.primed = asyncio.Event()
        self._empty = asyncio.Event()
        self._subs: list[Any] = []
        self.on_refresh: RefreshRequest = lambda _clients: None
        # Told of every mower event, so that Fleet's pending list does not undo it.
        self.on_mower_event: Callable[[uuid.UUID], object] = lambda _mower: None
        self._received = {
            name: metrics.received.labels(name)
            for name in (TELEMETRY.name, COMMANDS.name, EVENTS.name)
        }

    # -- positions ----------------------------------------------------------------------

    @property
    def position(self) -> Position:
        """Where the hub is in each stream."""
        return Position(self._t, self._c, self._e)

    def _id(self) -> str:
        return f"t{self._t}.c{self._c}.e{self._e}"

    # -- subscriptions ------------------------------------------------------------------

    async def start(self) -> None:
        """Follow the deny-list, subscribe to the three streams; ``primed`` is set once the
        latest states are in."""
        self._unsubscribe_denials = self._denylist.subscribe(self._on_denial)
        js = self._js
        last = {}
        for spec in (TELEMETRY, COMMANDS, EVENTS):
            info = await js.stream_info(spec.name)
            last[spec.name] = int(info.state.last_seq)
        self._t, self._c, self._e = last[TELEMETRY.name], last[COMMANDS.name], last[EVENTS.name]
        telemetry = await js.subscribe(
            TELEMETRY.subjects[0],
            stream=TELEMETRY.name,
            cb=self._on_telemetry,
            ordered_consumer=True,
            config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT),
        )
        self._subs.append(telemetry)
        for spec, callback in ((COMMANDS, self._on_command), (EVENTS, self._on_event)):
            sub = await js.subscribe(
                spec.subjects[0],
                stream=spec.name,
                cb=callback,
                ordered_consumer=True,
                config=api.ConsumerConfig(
                    deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                    opt_start_seq=last[spec.name] + 1,
                ),
            )
            self._subs.append(sub)
        consumer = await telemetry.consumer_info()
        if not consumer.num_pending:
            self.primed.set()

    async def stop(self) -> None:
        """Unsubscribe and close every client."""
        if self._unsubscribe_denials is not None:
            self._unsubscribe_denials()
            self._unsubscribe_denials = None
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception as err:
                log.warning("unsubscribe failed", error=str(err))
        self._subs.clear()
        for client in list(self.clients):
            client.close("shutdown")

    @property
    def alive(self) -> bool:
        """True while the three subscriptions are in place."""
        return len(self._subs) == 3

    async def _on_telemetry(self, msg: Msg) -> None:
        self._received[TELEMETRY.name].inc()
        seq = delivery(msg.reply)[1]
        # The latest message of each subject comes first, then the new ones: keep the highest.
        self._t = max(self._t, seq)
        found = state_item(msg.subject, msg.data)
        if not self.primed.is_set() and msg.metadata.num_pending == 0:
            self.primed.set()
        if found is None:
            return
        item = found.item
        audience, move = self.mowers.report(
            item.mower_id, item.data, found.account_id, found.observed_at
        )
        if move is not None:
            self._moved(item.mower_id, move)
        self._dispatch(item, audience)

    async def _on_command(self, msg: Msg) -> None:
        self._received[COMMANDS.name].inc()
        self._c = delivery(msg.reply)[1]
        item = command_item(msg.subject, msg.data)
        if item is not None:
            self._dispatch(item, self.mowers.account_of(item.mower_id))

    async def _on_event(self, msg: Msg) -> None:
        self._received[EVENTS.name].inc()
        self._e = delivery(msg.reply)[1]
        event = event_item(msg.subject, msg.data)
        if event is None:
            return
        item = link_item(event) or notification_item(event) or alarm_item(event)
        if item is not None:
            self._dispatch(item, self.mowers.account_of(item.mower_id))
            return
        payload = event.payload
        if isinstance(payload, GrantsChanged):
            self.on_refresh(self._grantees(payload))
        elif isinstance(payload, MowerRegistration):
            self.on_mower_event(payload.mower_id)
            self._fleet_says(payload, removed=event.type == "mower.removed")

    def _fleet_says(self, registration: MowerRegistration, *, removed: bool) -> None:
        mower = registration.mower_id
        if removed:
            self._moved(mower, self.mowers.remove(mower))
        else:
            # Also when the account stays: a registration writes the mower's tuples.
            self._moved(mower, self.mowers.assign(mower, registration.account_id))

    async def apply_fleet_list(self, registrations: list[MowerRegistration]) -> int:
        """Take in Fleet's list of mowers (the seed's; without those that had an event)."""
        left: set[uuid.UUID] = set()
        joined: set[uuid.UUID] = set()
        for registration in registrations:
            before, after = self.mowers.assign(registration.mower_id, registration.account_id)
            if before != after:
                if before is not None:
                    left.add(before)
                if after is not None:
                    joined.add(after)
        for account in left:
            for client in list(self._by_account.get(account, ())):
                self.update_visible(client, client.mowers)
        self.on_refresh([c for account in joined for c in self._by_account.get(account, ())])
        return len(registrations)

    def _moved(self, mower: uuid.UUID, move: Move) -> None:
        """``mower`` belongs to ``move.after`` now: it leaves the streams of
        ``move.before`` at once, and those of ``move.after`` ask for their visible mowers
        again."""
        before, after = move
        if before is not None and before != after:
            # One smaller set per group, not a rescoping of every stream's mowers.
            smaller: dict[frozenset[uuid.UUID], frozenset[uuid.UUID]] = {}
            for client in list(self._by_account.get(before, ())):
                if mower in client.mowers:
                    mowers = smaller.get(client.mowers)
                    if mowers is None:
                        mowers = smaller[client.mowers] = self._groups.canonical(
                            before, client.mowers - {mower}
                        )
                    self._apply(client, mowers)
        if after is not None:
            self.on_refresh(list(self._by_account.get(after, ())))

    def _grantees(self, change: GrantsChanged) -> list[Client] | None:
        if change.user_id is not None:
            return list(self._by_user.get(change.user_id, ()))
        if change.account_id is not None:
            return list(self._by_account.get(change.account_id, ()))
        return None  # everyone

    def _dispatch(self, item: Item, account: uuid.UUID | None) -> None:
        """Offer ``item`` to the streams of ``account`` that show its mower."""
        groups = self._groups.of_mower(item.mower_id)
        if not groups or account is None:
            return
        now = time.monotonic()
        out = Frame(item.type, self._id(), item.data, item.mower_id, now)
        kind, user = item.type, item.user_id
        for group in groups:
            if group.account != account:
                continue
            for client in group.clients:
                if kind in client.types and (user is None or user == client.user_id):
                    client.offer(out, now)

    # -- clients ------------------------------------------------------------------------

    def connections_of(self, user_id: str) -> int:
        """How many streams ``user_id`` has open here."""
        return len(self._by_user.get(user_id, ()))

    def scoped(self, visible: Collection[uuid.UUID], account: uuid.UUID) -> frozenset[uuid.UUID]:
        """The ``visible`` mowers that belong to ``account``, as the set its clients share."""
        return self._groups.canonical(account, scoped(visible, account, self.mowers.account_of))

    def register(self, client: Client) -> Position:
        """Index ``client``; frames for it are buffered from now on. Returns the position."""
        self.clients.add(client)
        self._by_user.setdefault(client.user_id, set()).add(client)
        self._by_account.setdefault(client.account_id, set()).add(client)
        self._groups.join(client)
        self.metrics.connections.labels(client.transport).inc()
        # The route checked the deny-list before its awaits; a denial that arrived since
        # found no stream of the user to close: this one closes at once.
        denial = self._denylist.denial(client.user_id)
        if denial is not None:
            client.close(_close_reason(denial))
        return self.position

    def unregister(self, client: Client) -> None:
        """Forget ``client``."""
        if client not in self.clients:
            return
        self.clients.discard(client)
        _discard(self._by_user, client.user_id, client)
        _discard(self._by_account, client.account_id, client)
        self._groups.leave(client)
        self.metrics.connections.labels(client.transport).dec()
        if not self.clients:
            self._empty.set()

    async def drained(self) -> None:
        """Return once no client is registered."""
        if self.clients:
            self._empty.clear()
            await self._empty.wait()

    def snapshot(self, client: Client) -> tuple[list[bytes], set[uuid.UUID]]:
        """The latest states of the client's mowers held here, and the mowers without one.

        A held state that names another account than the client's is neither (a mower
        whose last report predates a move is shown without a state).
        """
        held: list[bytes] = []
        missing: set[uuid.UUID] = set()
        for mower in client.mowers:
            found = self.mowers.get(mower)
            if found is None or found.data is None:
                missing.add(mower)
            elif found.shows_state_to(client.account_id):
                held.append(found.data)
        return held, missing

    def observed(self, mower_id: uuid.UUID) -> datetime | None:
        """When the latest state held of ``mower_id`` was observed."""
        found = self.mowers.get(mower_id)
        return None if found is None else found.observed_at

    def update_visible(self, client: Client, visible: frozenset[uuid.UUID]) -> None:
        """Apply a fresh visible set: stop the revoked mowers, start (and show) the new ones."""
        if client not in self.clients:
            return
        self._apply(client, self.scoped(client.narrow(visible), client.account_id))

    def _apply(self, client: Client, mowers: frozenset[uuid.UUID]) -> None:
        """Show ``mowers`` (canonical) on ``client``'s stream from now on."""
        removed, added = client.mowers - mowers, mowers - client.mowers
        if not removed and not added:
            return
        self._groups.leave(client)
        client.mowers = mowers
        self._groups.join(client)
        client.buffer.discard_mowers(set(removed))
        now = time.monotonic()
        body = {"added": sorted(str(m) for m in added), "removed": sorted(str(m) for m in removed)}
        client.offer(frame("access", self._id(), msgspec.json.encode(body)), now)
        if "state" in client.types:
            for mower in sorted(added):
                found = self.mowers.get(mower)
                if found is not None and found.data and found.shows_state_to(client.account_id):
                    client.offer(Frame("state", self._id(), found.data, mower, now), now)

    def _on_denial(self, denial: Denial) -> None:
        """Close the streams of a user put on the deny-list (disabled or deleted)."""
        for client in list(self._by_user.get(denial.user_id, ())):
            client.close(_close_reason(denial))

    def heartbeat(self) -> None:
        """Offer every client a heartbeat carrying the current position."""
        now = time.monotonic()
        beat = frame("heartbeat", self._id(), b"{}")
        for client in list(self.clients):
            client.offer(beat, now)

    def closing_frame(self, reason: str) -> Frame:
        """The ``close`` event telling a client why its stream ends."""
        return frame("close", self._id(), close_data(reason))

    def current_id(self) -> str:
        """The id of the current position."""
        return format_position(self.position)


def _close_reason(denial: Denial) -> str:
    return f"user-{denial.reason}"  # user-disabled, user-deleted


def _discard(index: dict[Any, set[Client]], key: Any, client: Client) -> None:
    found = index.get(key)
    if found is not None:
        found.discard(client)
        if not found:
            del index[key]
