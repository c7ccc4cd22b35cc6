"""Clients indexed by mower through groups: the clients of one account that show the same
mowers share one interned set and one index entry per mower.

Readers of one account mostly see the same mowers: one set (and one index entry per
mower) for all of them instead of one per connection. A group belongs to one account, and
the hub offers a frame about a mower only to the groups of the account the frame's mower
(or state) belongs to.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from mowdeck.realtime.client import Client

__all__ = ["Group", "Groups"]

_Key = tuple[uuid.UUID, frozenset[uuid.UUID]]


class Group:
    """The clients of one account that show the same mowers."""

    __slots__ = ("account", "clients", "mowers")

    def __init__(self, account: uuid.UUID, mowers: frozenset[uuid.UUID]) -> None:
        self.account = account
        self.mowers = mowers
        self.clients: set[Client] = set()


class Groups:
    """The groups, by account and mower set, and the index from mower to groups."""

    def __init__(self) -> None:
        self._groups: dict[_Key, Group] = {}
        self._by_mower: dict[uuid.UUID, list[Group]] = {}

    def of_mower(self, mower: uuid.UUID) -> list[Group] | None:
        """The groups showing ``mower`` (None when none does)."""
        return self._by_mower.get(mower)

    def canonical(self, account: uuid.UUID, mowers: Iterable[uuid.UUID]) -> frozenset[uuid.UUID]:
        """``mowers`` as the one frozenset every client of ``account`` with them shares."""
        key = frozenset(mowers)
        group = self._groups.get((account, key))
        return key if group is None else group.mowers

    def join(self, client: Client) -> None:
        """Put ``client`` into the group of its account and mowers."""
        key = (client.account_id, client.mowers)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = Group(client.account_id, client.mowers)
            for mower in group.mowers:
                self._by_mower.setdefault(mower, []).append(group)
        client.mowers = group.mowers
        group.clients.add(client)

    def leave(self, client: Client) -> None:
        """Take ``client`` out of its group; the last one out removes the group."""
        key = (client.account_id, client.mowers)
        group = self._groups.get(key)
        if group is None:
            return
        group.clients.discard(client)
        if group.clients:
            return
        del self._groups[key]
        for mower in group.mowers:
            groups = self._by_mower.get(mower)
            if groups is not None:
                groups.remove(group)
                if not groups:
                    del self._by_mower[mower]
