"""What the hub knows of each mower: its latest state and the account it belongs to.

A stream shows the mowers its reader may view (authorization tuples) that belong to its
token's account (the data), as Fleet and Telemetry filter their rows by the token's
account; the account never comes from the tuples. Fleet's word wins: its
``fleet.mowers.list`` at start and its ``mower.registered|updated|removed`` events. A mower
Fleet has not named (its list is pending, or Fleet is away) belongs to the account on its
latest state in TELEMETRY, which the gateway stamps from Fleet's registration. A mower
known from neither belongs to no account and is shown to no stream. A state is shown to
the account it names, and to none when Fleet names another (Telemetry drops such a state
too).

Pure: no I/O. One small entry per mower (its latest state and Fleet's account side by
side, so a mower id is held once), and one object per account id shared by all entries.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import NamedTuple

import msgspec

__all__ = ["Move", "Mower", "MowerDirectory", "mower_account", "scoped", "state_account"]


def mower_account(fleet: uuid.UUID | None, state: uuid.UUID | None) -> uuid.UUID | None:
    """The account of a mower: Fleet's word, else its latest state's, else none known."""
    return fleet if fleet is not None else state


def state_account(fleet: uuid.UUID | None, state: uuid.UUID) -> uuid.UUID | None:
    """The account a state may be shown to: its own, unless Fleet names another (none)."""
    return state if fleet is None or fleet == state else None


def scoped(
    mowers: Iterable[uuid.UUID],
    account: uuid.UUID,
    account_of: Callable[[uuid.UUID], uuid.UUID | None],
) -> set[uuid.UUID]:
    """The ``mowers`` that belong to ``account`` (a mower of no known account is left out)."""
    return {m for m in mowers if account_of(m) == account}


class Mower(msgspec.Struct, gc=False):
    """A mower's latest state held (``data`` None: none) and Fleet's account for it.

    No containers, so the collector does not track it.
    """

    data: bytes | None = None
    state_account: uuid.UUID | None = None  # the account the latest state names
    observed_at: datetime | None = None
    fleet: uuid.UUID | None = None  # the account Fleet named

    @property
    def account(self) -> uuid.UUID | None:
        """The account the mower belongs to (None: not known)."""
        return mower_account(self.fleet, self.state_account)

    def shows_state_to(self, account: uuid.UUID) -> bool:
        """Whether the latest state held may be shown to a stream of ``account``."""
        state = self.state_account
        return state is not None and state_account(self.fleet, state) == account


class Move(NamedTuple):
    """The account a mower belonged to before a change and after it (None: not known)."""

    before: uuid.UUID | None
    after: uuid.UUID | None


class MowerDirectory:
    """Every mower the hub knows of, by id: ``Mower`` entries."""

    __slots__ = ("_accounts", "_mowers")

    def __init__(self) -> None:
        self._mowers: dict[uuid.UUID, Mower] = {}
        self._accounts: dict[uuid.UUID, uuid.UUID] = {}

    def __len__(self) -> int:
        return len(self._mowers)

    def get(self, mower: uuid.UUID) -> Mower | None:
        """What is known of ``mower``."""
        return self._mowers.get(mower)

    def account_of(self, mower: uuid.UUID) -> uuid.UUID | None:
        """The account ``mower`` belongs to, None when not known."""
        found = self._mowers.get(mower)
        return None if found is None else found.account

    def intern(self, account: uuid.UUID) -> uuid.UUID:
        """The one shared object equal to ``account``."""
        return self._accounts.setdefault(account, account)

    def report(
        self, mower: uuid.UUID, data: bytes, account: uuid.UUID, observed_at: datetime
    ) -> tuple[uuid.UUID | None, Move | None]:
        """A state of ``mower`` naming ``account``, now its latest: the account it may be
        shown to, and the mower's move when its account changed with it (Fleet had not
        named one)."""
        account = self.intern(account)
        previous = self._mowers.get(mower)
        fleet = None if previous is None else previous.fleet
        self._mowers[mower] = Mower(data, account, observed_at, fleet)
        if fleet is not None:
            return state_account(fleet, account), None
        before = None if previous is None else previous.state_account
        # Interned on both sides, so identity is equality here (and costs no call).
        return account, None if before is account else Move(before, account)

    def assign(self, mower: uuid.UUID, account: uuid.UUID) -> Move:
        """Fleet registered, updated or listed ``mower`` in ``account``."""
        previous = self._mowers.get(mower)
        fleet = self.intern(account)
        if previous is None:
            self._mowers[mower] = Mower(fleet=fleet)
            return Move(None, fleet)
        self._mowers[mower] = msgspec.structs.replace(previous, fleet=fleet)
        return Move(previous.account, fleet)

    def remove(self, mower: uuid.UUID) -> Move:
        """Fleet removed ``mower``: forget it and its state."""
        previous = self._mowers.pop(mower, None)
        return Move(None if previous is None else previous.account, None)
