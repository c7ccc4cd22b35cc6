"""Stream tickets: short-lived, single-use stand-ins for a bearer token in a URL.

A browser's ``EventSource`` cannot send headers, and a token in a URL ends up in logs and
histories. ``POST /v1/stream/tickets`` (with the token in its header) gives a random ticket
that names the verified caller, never the token. Redeeming is a create-only write of a
marker in a NATS key-value bucket: exactly one replica's write succeeds, so a ticket
opens one stream across all replicas. The bucket's age limit removes both afterwards.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Protocol

import msgspec
from nats.js import JetStreamContext, api
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from mowdeck.authn import Principal
from mowdeck.realtime.errors import RealtimeError, TicketError

__all__ = ["MemoryTickets", "NatsTickets", "TicketReply", "Tickets", "open_bucket"]

_USED = ".used"


class TicketReply(msgspec.Struct, frozen=True, kw_only=True):
    """A single-use ticket for one stream (``?ticket=``), good for ``expires_in`` seconds."""

    ticket: str
    expires_in: float


class _Claims(msgspec.Struct, frozen=True):
    user_id: str
    account_id: uuid.UUID
    expires_at: float  # seconds since the epoch


_decoder = msgspec.json.Decoder(_Claims)


class Tickets(Protocol):
    """Issues and redeems stream tickets."""

    async def issue(self, caller: Principal, now: float) -> str:
        """A fresh ticket for ``caller``, valid until ``now`` plus the ticket lifetime."""
        ...

    async def redeem(self, ticket: str, now: float) -> Principal:
        """The caller a ticket names, once; ``TicketError`` when unknown, expired or used."""
        ...


def _new_ticket() -> str:
    return secrets.token_urlsafe(24)  # only [A-Za-z0-9_-]: a valid key-value key


def _valid_form(ticket: str) -> bool:
    return 16 <= len(ticket) <= 64 and all(c.isalnum() or c in "-_" for c in ticket)


def _check(claims: _Claims | None, now: float) -> Principal:
    if claims is None:
        raise TicketError("unknown", "the ticket is not known (or expired)")
    if now >= claims.expires_at:
        raise TicketError("expired", "the ticket has expired")
    return Principal(claims.user_id, claims.account_id)


class NatsTickets(Tickets):
    """Tickets in a NATS key-value bucket shared by every replica."""

    def __init__(self, kv: KeyValue, ttl: float) -> None:
        self._kv = kv
        self._ttl = ttl

    async def issue(self, caller: Principal, now: float) -> str:
        """Store the caller under a fresh ticket."""
        ticket = _new_ticket()
        claims = _Claims(caller.user_id, caller.account_id, now + self._ttl)
        await self._kv.create(ticket, msgspec.json.encode(claims))
        return ticket

    async def redeem(self, ticket: str, now: float) -> Principal:
        """Read the claims, then win the create-only write of the ticket's used marker."""
        if not _valid_form(ticket):
            raise TicketError("unknown", "the ticket is not known (or expired)")
        try:
            entry = await self._kv.get(ticket)
        except KeyNotFoundError:
            entry = None
        claims = None if entry is None or entry.value is None else _decoder.decode(entry.value)
        caller = _check(claims, now)
        try:
            await self._kv.create(ticket + _USED, b"")
        except KeyWrongLastSequenceError as err:
            raise TicketError("used", "the ticket was used already") from err
        return caller


async def open_bucket(js: JetStreamContext, bucket: str, ttl: float) -> KeyValue:
    """The tickets bucket, created with an age limit of ``ttl`` when missing."""
    try:
        return await js.key_value(bucket)
    except BucketNotFoundError:
        pass
    try:
        return await js.create_key_value(
            api.KeyValueConfig(bucket=bucket, ttl=ttl, history=1, storage=api.StorageType.MEMORY)
        )
    except Exception as err:
        # Another replica may have created it meanwhile: then it is there to open.
        try:
            return await js.key_value(bucket)
        except BucketNotFoundError:
            pass
        raise RealtimeError(f"cannot create the key-value bucket {bucket}: {err}") from err


class MemoryTickets(Tickets):
    """Tickets in a dict, for tests and a single process."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._claims: dict[str, _Claims] = {}
        self._used: set[str] = set()

    async def issue(self, caller: Principal, now: float) -> str:
        """Remember the caller under a fresh ticket."""
        ticket = _new_ticket()
        self._claims[ticket] = _Claims(caller.user_id, caller.account_id, now + self._ttl)
        return ticket

    async def redeem(self, ticket: str, now: float) -> Principal:
        """The caller, the first time only."""
        caller = _check(self._claims.get(ticket), now)
        if ticket in self._used:
            raise TicketError("used", "the ticket was used already")
        self._used.add(ticket)
        return caller
