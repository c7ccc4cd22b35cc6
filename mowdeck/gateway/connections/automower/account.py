"""One Automower Connect account link per credential, shared by the mowers naming it.

The vendor's API is per application, not per mower: one OAuth2 token (client
credentials, refreshed before it expires), one WebSocket carrying every mower's events,
and one request budget (about one request a second; a 429 says when to come back in
``Retry-After``). So the mowers of one credential share one ``AccountLink``: it logs in,
opens the WebSocket, then takes one ``GET /mowers`` snapshot (the WebSocket first, so no
event falls between the two), hands each mower its attributes and then its events, and
reconnects with jittered backoff, taking a new snapshot, when anything of it fails.
A mower attached while the account is already up gets a snapshot of its own (one
``GET /mowers`` for every mower attached in the meantime; its events are held until the
snapshot is handed over, as at connect), retried with backoff while the account stays up.
Every URL is checked against ``MOWDECK_GATEWAY_DEVICE_HOSTS`` before each connect and
dialled through the gateway's guarded session (no redirects); the secret is read from the
named credential on every connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Protocol

import aiohttp
import msgspec
import structlog

from mowdeck.gateway.connections.automower.budget import BudgetMetrics, MonthlyBudget
from mowdeck.gateway.connections.credentials import CredentialError
from mowdeck.gateway.connections.port import ConnectionDeps, LinkDownError
from mowdeck.kit.background import cancel_and_wait
from simulator.automower.protocol import (
    Event,
    MowerAttributes,
    ProtocolError,
    decode_event,
    decode_snapshot,
)

__all__ = ["AccountLink", "ApiAnswer", "ClientLogin", "Limiter", "Member", "account_for"]

log = structlog.get_logger("mowdeck.gateway.automower")

# The vendor's limit is one request a second per application; spaced exactly so, a request
# meets the cloud's clock a hair early now and then and is answered 429 (tests/bench
# adapters.py saw it at the first command after a snapshot): a tenth of a second of room.
REQUEST_INTERVAL_SECONDS = 1.1
PING_SECONDS = 60.0  # the vendor's WebSocket closes after a quiet while; "ping" keeps it
PONG_SECONDS = 10.0  # nothing at all this long after a ping: the socket is dead
BACKOFF_INITIAL, BACKOFF_MAX = 1.0, 60.0
REFRESH_MARGIN_SECONDS = 300.0  # a token is renewed this long before it expires...
REFRESH_MARGIN_SHARE = 0.2  # ...or this share of its life, whichever is shorter
_TIMEOUT = aiohttp.ClientTimeout(total=15)
_SHOWN = 300  # characters of an error answer put in a reason


class ClientLogin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An application's login: ``{"client_id": ..., "client_secret": ...}``."""

    client_id: str
    client_secret: str


class _Token(msgspec.Struct, frozen=True):
    access_token: str
    expires_in: float


class ApiAnswer(msgspec.Struct, frozen=True):
    """A REST answer: its status and body."""

    status: int
    body: bytes


class Member(Protocol):
    """A mower's connection as its account link sees it."""

    vendor_id: str

    def on_snapshot(self, attributes: MowerAttributes | None) -> None:
        """The account is up: the mower's attributes, or None when the account has it not."""

    def on_event(self, event: Event) -> None:
        """An event about the mower."""

    def on_down(self, reason: str) -> None:
        """The account link went down."""


class Limiter:
    """The account's request budget: one request every ``interval`` seconds, in order;
    an urgent request (an emergency stop) goes at once; a 429 holds the rest back."""

    def __init__(self, interval: float = REQUEST_INTERVAL_SECONDS) -> None:
        self.interval = interval
        self._next = 0.0
        self._held_until = 0.0
        self._lock = asyncio.Lock()

    async def wait(self, *, urgent: bool = False) -> None:
        loop = asyncio.get_running_loop()
        if urgent:
            self._next = max(self._next, loop.time()) + self.interval
            return
        async with self._lock:
            delay = max(self._next, self._held_until) - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._next = loop.time() + self.interval

    def hold(self, seconds: float) -> None:
        """Send nothing more for ``seconds`` (a 429's ``Retry-After``)."""
        until = asyncio.get_running_loop().time() + seconds
        self._held_until = max(self._held_until, until)


def _budget_metrics(deps: ConnectionDeps) -> BudgetMetrics | None:
    # One gauge per gateway registry, made by the first account link of the gateway.
    if deps.registry is None:
        return None
    found = deps.shared.get("automower-budget")
    if found is None:
        found = deps.shared["automower-budget"] = BudgetMetrics(deps.registry)
    assert isinstance(found, BudgetMetrics)
    return found


def account_for(name: str, deps: ConnectionDeps) -> AccountLink:
    """The account link of credential ``name`` in ``deps`` (made on first use)."""
    accounts = deps.shared.setdefault("automower", {})
    assert isinstance(accounts, dict)
    link = accounts.get(name)
    if link is None:
        link = accounts[name] = AccountLink(name, deps)
    assert isinstance(link, AccountLink)
    return link


class AccountLink:
    """The link of one credential; runs while a mower is attached."""

    def __init__(self, name: str, deps: ConnectionDeps) -> None:
        self.name = name
        self._deps = deps
        self.members: dict[str, Member] = {}
        self.limiter = Limiter()
        self.budget = MonthlyBudget(name, _budget_metrics(deps))
        self.up = False
        self.reason: str | None = "not connected yet"
        self.token_refreshes = 0
        self._came_up = False  # this connect got as far as a snapshot
        self._ending: str | None = None  # why this connect is being ended, if by us
        self._heard_at = 0.0  # the socket's last message, on the loop's clock
        self._token: str | None = None
        self._login: ClientLogin | None = None
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        # Members attached after the account came up, waiting for their own snapshot, with
        # the events heard for them meanwhile (handed over after it, as at connect).
        self._late: dict[str, list[Event]] = {}
        self._late_task: asyncio.Task[None] | None = None
        self._snapshots = 0  # connects that took their snapshot: a late answer's own
        self._log = log.bind(credential=name)

    def _serving(self) -> bool:
        """Up, with this connect's snapshot taken."""
        return self.up and self._came_up

    def attach(self, member: Member) -> None:
        self.members[member.vendor_id] = member
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"automower-account-{self.name}")
        elif self._serving():
            # The connect's snapshot is taken: this mower needs one of its own.
            self._late.setdefault(member.vendor_id, [])
            if self._late_task is None or self._late_task.done():
                self._late_task = asyncio.create_task(
                    self._late_snapshots(), name=f"automower-late-snapshot-{self.name}"
                )

    async def detach(self, member: Member) -> None:
        if self.members.get(member.vendor_id) is member:
            del self.members[member.vendor_id]
            self._late.pop(member.vendor_id, None)
        if not self.members and self._task is not None:
            task, self._task = self._task, None
            accounts = self._deps.shared.get("automower")
            if isinstance(accounts, dict) and accounts.get(self.name) is self:
                del accounts[self.name]
            late, self._late_task = self._late_task, None
            # Both cancelled before either is waited for: a close cancelled while waiting
            # must not leave the account's loop running with no mower.
            for running in (late, task):
                if running is not None:
                    running.cancel()
            await cancel_and_wait(late, name="automower late snapshot")
            await cancel_and_wait(task, name="automower account")

    # Requests.

    async def request(
        self, method: str, path: str, body: object | None = None, *, urgent: bool = False
    ) -> ApiAnswer:
        """One REST request within the budget; a 401 renews the token once, a 429 waits
        its ``Retry-After`` and tries again. ``LinkDownError`` when the account is down."""
        for attempt in range(3):
            connection = self._session
            self._current(connection)
            await self.limiter.wait(urgent=urgent and attempt == 0)
            # The link may have gone, or its token been renewed, while this waited its turn.
            session, token, login = self._current(connection)
            answer = await self._send(session, token, login, (method, path, body))
            if answer.status == 401 and attempt == 0:
                await self._renew(session, login)
                continue
            if answer.status == 429:
                self.limiter.hold(_retry_after(answer))
                continue
            return answer
        return answer

    def _current(
        self, session: aiohttp.ClientSession | None
    ) -> tuple[aiohttp.ClientSession, str, ClientLogin]:
        """The session, token and login of the account, up on ``session`` still;
        ``LinkDownError`` otherwise."""
        token, login = self._token, self._login
        up = self.up and session is not None and session is self._session
        if not up or session is None or token is None or login is None:
            raise LinkDownError(f"automower account {self.name!r} is down: {self.reason}")
        return session, token, login

    async def _send(
        self,
        session: aiohttp.ClientSession,
        token: str,
        login: ClientLogin,
        what: tuple[str, str, object | None],
    ) -> ApiAnswer:
        method, path, body = what
        url = f"{self._deps.automower.api_url.rstrip('/')}{path}"
        headers = {
            "Authorization": f"Bearer {token}",
            "X-Api-Key": login.client_id,
            "Authorization-Provider": "husqvarna",
            "Content-Type": "application/vnd.api+json",
        }
        data = msgspec.json.encode(body) if body is not None else None
        self.budget.spend()
        async with session.request(
            method, url, headers=headers, data=data, timeout=_TIMEOUT
        ) as resp:
            retry = resp.headers.get("Retry-After", "")
            answer = ApiAnswer(resp.status, await resp.read())
        if answer.status == 429:
            return ApiAnswer(429, retry.encode())
        return answer

    async def _renew(self, session: aiohttp.ClientSession, login: ClientLogin) -> float:
        """A new token; its lifetime in seconds."""
        form = {
            "grant_type": "client_credentials",
            "client_id": login.client_id,
            "client_secret": login.client_secret,
        }
        async with session.post(
            self._deps.automower.token_url, data=form, timeout=_TIMEOUT
        ) as resp:
            text = await resp.read()
            if resp.status != 200:
                shown = text[:_SHOWN].decode(errors="replace")
                raise LinkDownError(f"the token endpoint answered {resp.status}: {shown}")
        try:
            token = msgspec.json.decode(text, type=_Token)
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            raise LinkDownError(f"the token endpoint's answer is not a token: {err}") from None
        self._token = token.access_token
        self.token_refreshes += 1
        return token.expires_in

    async def _snapshot(self) -> dict[str, MowerAttributes]:
        """Every mower of the account by its id (``GET /mowers``)."""
        answer = await self.request("GET", "/mowers")
        if answer.status != 200:
            raise LinkDownError(f"GET /mowers answered {answer.status}: {_shown(answer)}")
        return decode_snapshot(answer.body).by_id()

    async def _late_snapshots(self) -> None:
        """Snapshots for the members attached after the account came up, one request for
        all of them at a time, until none waits; a failed one is retried with backoff
        while the account stays up. An answer or a failure of a connect that has since
        ended is dropped: the next connect's snapshot covers every member."""
        delay = BACKOFF_INITIAL
        while self._late:
            if not self._serving():
                self._late.clear()
                return
            snapshot = self._snapshots
            waiting = list(self._late)
            for vendor_id in waiting:
                self._late[vendor_id] = []  # what came before this request, it includes
            try:
                mowers = await self._snapshot()
            except Exception as err:  # the loop must go on: it holds the mowers' events
                if not self._serving() or self._snapshots != snapshot:
                    continue
                reason = f"automower account {self.name!r}: a new mower's snapshot failed: {err}"
                self._log.warning("automower snapshot failed", reason=reason, mowers=len(waiting))
                for vendor_id in waiting:
                    if vendor_id in self._late and (member := self.members.get(vendor_id)):
                        member.on_down(reason)
                await asyncio.sleep(random.uniform(delay / 2, delay))
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            if not self._serving() or self._snapshots != snapshot:
                continue
            for vendor_id in waiting:
                heard = self._late.pop(vendor_id, None)
                member = self.members.get(vendor_id)
                if heard is None or member is None:
                    continue  # detached, or covered by a reconnect's snapshot
                member.on_snapshot(mowers.get(vendor_id))
                for event in heard:
                    member.on_event(event)
            self._log.info("automower snapshot for new mowers", mowers=len(waiting))

    # The link.

    async def _run(self) -> None:
        delay = BACKOFF_INITIAL
        while True:
            self._came_up = False
            try:
                await self._connect()
            except asyncio.CancelledError:
                self._down("closed")
                raise
            except Exception as err:
                self._log.exception("automower account link failed; reconnecting")
                self._down(f"link error: {err!r}")
            if self._came_up:
                delay = BACKOFF_INITIAL
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, BACKOFF_MAX)

    def _refusal(self) -> str | None:
        for url in self._deps.automower.urls:
            why = self._deps.hosts.refusal(url)
            if why is not None:
                return f"{url} {why}"
        return None

    async def _connect(self) -> None:
        """One connection of the account, until it ends; down with the reason it ended."""
        refusal = self._refusal()
        if refusal is not None:
            self._down(refusal)
            return
        try:
            login = self._deps.credentials.read(self.name, ClientLogin)
        except CredentialError as err:
            self._down(str(err))
            return
        session = self._deps.sessions.acquire()
        self._ending = None
        reason = "WebSocket closed"
        try:
            await self._connected(session, login)
        except (aiohttp.ClientError, LinkDownError, ProtocolError, TimeoutError) as err:
            reason = f"automower account {self.name!r}: {err}"
        finally:
            self._session, self._token = None, None
            self._down(self._ending or reason)
            await self._deps.sessions.release(session)

    async def _connected(self, session: aiohttp.ClientSession, login: ClientLogin) -> None:
        lifetime = await self._renew(session, login)
        self._session, self._login = session, login
        headers = {"Authorization": f"Bearer {self._token}"}
        async with session.ws_connect(
            self._deps.automower.ws_url,
            headers=headers,
            timeout=aiohttp.ClientWSTimeout(ws_close=5),
        ) as ws:
            self.up, self.reason = True, None  # the snapshot's request needs it
            mowers = await self._snapshot()
            self._came_up = True
            self._snapshots += 1
            self._late.clear()  # this snapshot covers every member
            self._log.info("automower account up", mowers=len(mowers))
            for vendor_id, member in list(self.members.items()):
                member.on_snapshot(mowers.get(vendor_id))
            chores = [
                asyncio.create_task(self._keep_token(session, login, lifetime, ws)),
                asyncio.create_task(self._ping(ws)),
            ]
            try:
                async for msg in ws:
                    if msg.type == aiohttp.WSMsgType.TEXT:
                        self._on_message(msg.data)
                    elif msg.type == aiohttp.WSMsgType.ERROR:
                        break
            finally:
                for chore in chores:
                    chore.cancel()
                for chore in chores:
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await chore

    async def _keep_token(
        self,
        session: aiohttp.ClientSession,
        login: ClientLogin,
        lifetime: float,
        ws: aiohttp.ClientWebSocketResponse,
    ) -> None:
        """Renew the token before it expires; one that cannot be renewed ends the link."""
        while True:
            margin = min(REFRESH_MARGIN_SECONDS, lifetime * REFRESH_MARGIN_SHARE)
            await asyncio.sleep(max(0.1, lifetime - margin))
            try:
                lifetime = await self._renew(session, login)
            except (aiohttp.ClientError, LinkDownError, TimeoutError) as err:
                self._ending = f"automower account {self.name!r}: token renewal failed: {err}"
                await ws.close()
                return

    async def _ping(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """``ping`` now and again; a socket that then says nothing at all is ended (a
        connection gone without a close would otherwise look up for ever)."""
        loop = asyncio.get_running_loop()
        while not ws.closed:
            await asyncio.sleep(PING_SECONDS)
            sent = loop.time()
            await ws.send_str("ping")
            await asyncio.sleep(PONG_SECONDS)
            if self._heard_at < sent:
                self._ending = (
                    f"automower account {self.name!r}: no answer to ping in {PONG_SECONDS:g} s"
                )
                await ws.close()
                return

    def _on_message(self, data: str) -> None:
        self._heard_at = asyncio.get_running_loop().time()
        try:
            event = decode_event(data)
        except ProtocolError as err:
            self._log.debug("automower message not understood", error=str(err))
            return
        if event is None:
            return
        if (held := self._late.get(event.id)) is not None:
            held.append(event)  # its snapshot is on its way
        elif (member := self.members.get(event.id)) is not None:
            member.on_event(event)

    def _down(self, reason: str) -> None:
        was_up, self.up = self.up, False
        if reason != self.reason:
            self._log.warning("automower account down", reason=reason)
        self.reason = reason
        if was_up or reason:
            for member in list(self.members.values()):
                member.on_down(reason)


def _retry_after(answer: ApiAnswer) -> float:
    try:
        return max(0.0, min(3600.0, float(answer.body.decode() or 1)))
    except ValueError:
        return REQUEST_INTERVAL_SECONDS  # an HTTP date, or nothing: one interval


def _shown(answer: ApiAnswer) -> str:
    return answer.body[:_SHOWN].decode(errors="replace")
