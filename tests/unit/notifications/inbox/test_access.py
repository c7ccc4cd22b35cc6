"""The API's callers' access: kept as long as the decisions, dropped with them, a 403 never kept."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from mowdeck.authn import Principal
from mowdeck.authz import (
    DecisionCache,
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
    user_ref,
)
from mowdeck.kit.http import Problem
from mowdeck.notifications.inbox.access import AccessCache
from tests.unit.notifications.samples import ACCOUNT, MOWER


class Counting(LocalAuthorizer):
    """The in-process evaluator, counting the listings asked of it."""

    def __init__(self) -> None:
        super().__init__(InMemoryTupleStore())
        self.listed = 0

    async def list_objects(self, user: str, relation: str, type_: str) -> Sequence[str]:
        self.listed += 1
        return await super().list_objects(user, relation, type_)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _cache() -> tuple[Counting, AccessCache, Clock]:
    authz, clock = Counting(), Clock()
    await authz.write([Tuple(account_object(ACCOUNT), "account", mower_object(MOWER))])
    decisions = DecisionCache(authz, 60.0, clock=clock)
    return authz, AccessCache(authz, {MOWER: ACCOUNT}.get, decisions, 60.0, clock=clock), clock


async def test_a_callers_access_is_kept_for_the_decisions_lifetime_and_dropped_with_them() -> None:
    authz, cache, clock = await _cache()
    await authz.write([
        Tuple(user_ref("gus"), "member", account_object(ACCOUNT)),
        Tuple(user_ref("gus"), "viewer", "group:g"),
        Tuple("group:g", "group", mower_object(MOWER)),
    ])  # fmt: skip
    gus = Principal(user_id="gus", account_id=ACCOUNT)
    first = await cache.of(gus)
    assert first.mowers == frozenset({MOWER}) and authz.listed == 1
    assert await cache.of(gus) == first and authz.listed == 1  # kept
    clock.now = 61.0
    await cache.of(gus)
    assert authz.listed == 2  # expired with the decisions' lifetime
    cache.forget()  # grants changed
    await cache.of(gus)
    assert authz.listed == 3


async def test_a_refusal_is_not_kept() -> None:
    authz, cache, _ = await _cache()
    newcomer = Principal(user_id="nina", account_id=ACCOUNT)
    with pytest.raises(Problem) as refused:
        await cache.of(newcomer)
    assert refused.value.status == 403
    await authz.write(grant_tuples(ACCOUNT, "nina", "viewer"))
    assert (await cache.of(newcomer)).whole_account
