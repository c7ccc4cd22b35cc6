"""Which account a mower and a state belong to, and a reader's mowers: pure rules."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from mowdeck.realtime.accounts import (
    Move,
    Mower,
    MowerDirectory,
    mower_account,
    scoped,
    state_account,
)

A, B = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
M1, M2, M3, M4 = (uuid.UUID(int=i) for i in range(1, 5))


@pytest.mark.parametrize(
    ("fleet", "state", "expected"),
    [
        (A, None, A),
        (A, A, A),
        (A, B, A),
        (None, B, B),
        (None, None, None),
    ],
    ids=["fleet-only", "both-agree", "fleet-wins", "state-only", "unknown"],
)
def test_the_account_of_a_mower(
    fleet: uuid.UUID | None, state: uuid.UUID | None, expected: uuid.UUID | None
) -> None:
    assert mower_account(fleet, state) == expected


@pytest.mark.parametrize(
    ("fleet", "state", "expected"),
    [
        (None, A, A),
        (A, A, A),
        (B, A, None),
    ],
    ids=["fleet-silent", "fleet-agrees", "fleet-names-another"],
)
def test_the_account_a_state_is_shown_to(
    fleet: uuid.UUID | None, state: uuid.UUID, expected: uuid.UUID | None
) -> None:
    assert state_account(fleet, state) == expected


ACCOUNTS = {M1: A, M2: B, M3: None}


@pytest.mark.parametrize(
    ("visible", "account", "expected"),
    [
        ({M1, M2}, A, {M1}),
        ({M1, M2}, B, {M2}),
        ({M1, M3}, A, {M1}),
        ({M3, M4}, A, set()),
        (set(), A, set()),
    ],
    ids=["own-account", "other-account", "unknown-left-out", "nothing-known", "none-visible"],
)
def test_a_readers_mowers_are_its_visible_ones_of_its_tokens_account(
    visible: set[uuid.UUID], account: uuid.UUID, expected: set[uuid.UUID]
) -> None:
    assert scoped(visible, account, ACCOUNTS.get) == expected


def _at() -> datetime:
    return datetime(2026, 12, 1, tzinfo=UTC)


def test_fleets_word_wins_and_account_ids_are_shared() -> None:
    mowers = MowerDirectory()
    assert mowers.assign(M1, A) == Move(None, A)
    assert mowers.assign(M2, uuid.UUID(int=0xA)) == Move(None, A)  # equal, another object
    assert mowers.account_of(M1) is mowers.account_of(M2)
    assert mowers.intern(uuid.UUID(int=0xA)) is mowers.account_of(M1)
    # A state naming another account than Fleet's is shown to none and moves nothing.
    assert mowers.report(M1, b"{}", B, _at()) == (None, None)
    assert mowers.account_of(M1) == A
    assert mowers.report(M1, b"{}", A, _at()) == (A, None)
    assert mowers.assign(M1, B) == Move(A, B)  # moved by Fleet
    assert mowers.remove(M1) == Move(B, None)
    assert mowers.remove(M4) == Move(None, None)  # never known
    assert (mowers.account_of(M1), len(mowers)) == (None, 1)


def test_a_state_makes_a_mower_known_until_fleet_names_it() -> None:
    mowers = MowerDirectory()
    assert mowers.report(M1, b"{}", A, _at()) == (A, Move(None, A))
    assert mowers.report(M1, b"{}", uuid.UUID(int=0xA), _at()) == (A, None)  # no change
    assert mowers.report(M1, b"{}", B, _at()) == (B, Move(A, B))
    assert mowers.assign(M1, A) == Move(B, A)  # Fleet's word wins over the state's
    entry = mowers.get(M1)
    assert entry is not None
    assert (entry.data, entry.shows_state_to(A), entry.shows_state_to(B)) == (b"{}", False, False)


@pytest.mark.parametrize(
    ("entry", "account", "expected"),
    [
        (Mower(b"{}", A, None, None), A, True),
        (Mower(b"{}", A, None, A), A, True),
        (Mower(b"{}", A, None, B), A, False),
        (Mower(b"{}", A, None, B), B, False),
        (Mower(fleet=A), A, False),
    ],
    ids=["state-only", "fleet-agrees", "fleet-names-another", "not-to-fleets-either", "no-state"],
)
def test_whose_streams_a_held_state_is_shown_to(
    entry: Mower, account: uuid.UUID, expected: bool
) -> None:
    assert entry.shows_state_to(account) is expected
