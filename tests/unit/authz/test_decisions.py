"""The decision cache: kept for the ttl, bounded, dropped by forget(), one ask for the misses."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from mowdeck.authz import DecisionCache, InMemoryTupleStore, LocalAuthorizer


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class CountingAuthorizer(LocalAuthorizer):
    """Allows the pairs in ``allowed``; records every ``check_pairs``; may hold an answer."""

    def __init__(self) -> None:
        super().__init__(InMemoryTupleStore())
        self.allowed: set[tuple[str, str]] = set()
        self.asked: list[list[tuple[str, str]]] = []
        self.hold: asyncio.Event | None = None

    async def check_pairs(
        self, pairs: Sequence[tuple[str, str]], relation: str
    ) -> dict[tuple[str, str], bool]:
        self.asked.append(list(pairs))
        if self.hold is not None:
            await self.hold.wait()
        return {pair: pair in self.allowed for pair in pairs}


A, B, C = ("user:a", "mower:1"), ("user:b", "mower:1"), ("user:a", "mower:2")


async def test_a_decision_is_kept_for_its_ttl() -> None:
    authz, clock = CountingAuthorizer(), Clock()
    cache = DecisionCache(authz, 60.0, clock=clock)
    authz.allowed.add(A)
    assert await cache.check_pairs([A], "can_view") == {A: True}
    authz.allowed.clear()
    clock.t = 59.9
    assert await cache.check_pairs([A], "can_view") == {A: True}
    clock.t = 60.0
    assert await cache.check_pairs([A], "can_view") == {A: False}
    assert authz.asked == [[A], [A]]


async def test_only_the_pairs_not_cached_are_asked_in_one_round_trip() -> None:
    authz = CountingAuthorizer()
    cache = DecisionCache(authz, 60.0)
    authz.allowed.update({A, C})
    await cache.check_pairs([A, B], "can_view")
    assert await cache.check_pairs([A, B, C, C], "can_view") == {A: True, B: False, C: True}
    assert authz.asked == [[A, B], [C]]


async def test_no_ttl_keeps_nothing() -> None:
    authz = CountingAuthorizer()
    cache = DecisionCache(authz, 0.0)
    await cache.check_pairs([A], "can_view")
    await cache.check_pairs([A], "can_view")
    assert authz.asked == [[A], [A]]


async def test_at_most_max_entries_are_kept() -> None:
    authz = CountingAuthorizer()
    cache = DecisionCache(authz, 60.0, max_entries=2)
    for pair in (A, B):
        await cache.check_pairs([pair], "can_view")
    await cache.check_pairs([A, B], "can_view")
    assert authz.asked == [[A], [B]]  # both kept
    await cache.check_pairs([C], "can_view")  # a third drops them
    await cache.check_pairs([A, B, C], "can_view")
    assert authz.asked == [[A], [B], [C], [A, B]]


async def test_forget_drops_every_decision() -> None:
    authz = CountingAuthorizer()
    cache = DecisionCache(authz, 60.0)
    authz.allowed.add(A)
    assert await cache.check_pairs([A], "can_view") == {A: True}
    authz.allowed.clear()  # the grant was revoked, and grants.changed said so
    cache.forget()
    assert await cache.check_pairs([A], "can_view") == {A: False}


async def test_an_answer_loaded_across_forget_is_not_kept() -> None:
    authz = CountingAuthorizer()
    cache = DecisionCache(authz, 60.0)
    authz.allowed.add(A)
    authz.hold = asyncio.Event()
    asking = asyncio.create_task(cache.check_pairs([A], "can_view"))
    while not authz.asked:
        await asyncio.sleep(0)
    cache.forget()  # grants changed while the answer was on its way
    authz.hold.set()
    assert await asking == {A: True}  # handed out ...
    authz.hold = None
    await cache.check_pairs([A], "can_view")
    assert authz.asked == [[A], [A]]  # ... but not kept
