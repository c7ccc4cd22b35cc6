"""The mower registry's contracts, shared by Fleet, the gateway and Telemetry (ADR 0013)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec

from contracts.v1._base import ContractError, Struct

__all__ = [
    "LIST_PAGE_SIZE",
    "Connection",
    "MowerLink",
    "MowerListReply",
    "MowerListRequest",
    "MowerRegistration",
    "shard_of",
]

ConnectionKind = Annotated[
    str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")
]


class Connection(Struct, frozen=True):
    """How the gateway reaches a mower: an adapter kind and its options (no secrets)."""

    kind: ConnectionKind
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class MowerRegistration(Struct, frozen=True):
    """A mower as Fleet registered it; ``site_id`` is the site it belongs to, if any."""

    mower_id: uuid.UUID
    account_id: uuid.UUID
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    connection: Connection
    site_id: uuid.UUID | None = None


LIST_PAGE_SIZE = 1000
"""Mowers per ``MowerListReply`` page when the request names no ``limit`` (stays far
below NATS's default 1 MB payload limit)."""


class MowerListRequest(Struct, frozen=True):
    """Ask Fleet for the mowers of one gateway shard; ``shard_count=1`` means all.

    Rule across fields (a decoder refuses a message that breaks it): ``shard_index`` is
    less than ``shard_count``.

    Pages: mowers come ordered by id; ``after`` continues behind the last id of the
    previous page, and a reply whose ``next_after`` is set has more.
    """

    shard_index: Annotated[int, msgspec.Meta(ge=0)] = 0
    shard_count: Annotated[int, msgspec.Meta(ge=1, le=4096)] = 1
    after: uuid.UUID | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=10_000)] | None = None

    def __post_init__(self) -> None:
        if self.shard_index >= self.shard_count:
            raise ContractError("`shard_index` must be less than `shard_count`")

    def owns(self, mower_id: uuid.UUID) -> bool:
        """True when ``mower_id`` belongs to this shard."""
        return shard_of(mower_id, self.shard_count) == self.shard_index

    def answer(self, registrations: Iterable[MowerRegistration]) -> MowerListReply:
        """The reply page for this request out of every registration."""
        mine = sorted(
            (
                r
                for r in registrations
                if self.owns(r.mower_id) and (self.after is None or r.mower_id > self.after)
            ),
            key=lambda r: r.mower_id,
        )
        size = self.limit or LIST_PAGE_SIZE
        page = mine[:size]
        more = len(mine) > size
        return MowerListReply(mowers=page, next_after=page[-1].mower_id if more else None)

    def next_page(self, reply: MowerListReply) -> MowerListRequest | None:
        """The request for the page after ``reply``, or None when it was the last."""
        if reply.next_after is None:
            return None
        return msgspec.structs.replace(self, after=reply.next_after)


class MowerListReply(Struct, frozen=True):
    """Fleet's answer to a ``MowerListRequest``; ``next_after`` set means more pages."""

    mowers: list[MowerRegistration] = msgspec.field(default_factory=list)
    next_after: uuid.UUID | None = None


class MowerLink(Struct, frozen=True):
    """Payload of ``mower.connected`` and ``mower.disconnected``."""

    mower_id: uuid.UUID
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None


def shard_of(mower_id: uuid.UUID, shard_count: int) -> int:
    """The gateway shard that owns ``mower_id`` (static modulo sharding, ADR 0013)."""
    return mower_id.int % shard_count
