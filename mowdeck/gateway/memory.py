"""Command ids remembered until a while after their commands expire.

A redelivered command must produce no second result and never run twice. Both the shard
(``intake``: the ids it admitted, so a redelivery is recognised before admission would
answer it again) and each mower's controller (the ids it accepted, so a stream copy or a
restart's redelivery is not run again) remember ids for as long as a redelivery can come:
until ``REMEMBER_AFTER_EXPIRY_S`` after the command expires. Later, admission answers a
redelivery (``expired``) before either memory is asked, so a longer memory protects
nothing; each also has a count limit (the oldest go first).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from datetime import datetime

from contracts.v1 import CommandEnvelope

__all__ = ["REMEMBER_AFTER_EXPIRY_S", "CommandMemory"]

REMEMBER_AFTER_EXPIRY_S = 300.0


class CommandMemory:
    """Command ids, each kept until ``after_expiry_s`` after its command expires, and at
    most ``limit`` of them (the oldest go first)."""

    __slots__ = ("_after_expiry_s", "_ids", "_limit")

    def __init__(self, *, limit: int, after_expiry_s: float = REMEMBER_AFTER_EXPIRY_S) -> None:
        self._after_expiry_s = after_expiry_s
        self._limit = limit
        # Keyed by the id's integer: a UUID object is tracked by the garbage collector, an
        # int is not, and a hundred thousand of them would be walked by every full
        # collection. Each to when it may be forgotten (epoch seconds).
        self._ids: OrderedDict[int, float] = OrderedDict()

    def __contains__(self, command_id: object) -> bool:
        return isinstance(command_id, uuid.UUID) and command_id.int in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def remember(self, envelope: CommandEnvelope, now: datetime) -> bool:
        """Remember ``envelope``'s id and forget those whose time is up; True when it was
        remembered already (a redelivery)."""
        ids, key = self._ids, envelope.command_id.int
        if key in ids:
            return True
        ids[key] = envelope.expires_at.timestamp() + self._after_expiry_s
        # Insertion order is arrival order; expiries differ per command, so a long-lived id
        # can hold shorter ones behind it until the limit takes them.
        now_s = now.timestamp()
        while ids and (len(ids) > self._limit or next(iter(ids.values())) < now_s):
            ids.popitem(last=False)
        return False
