"""A bounded cache of authorization decisions, for the services that ask the same again.

Fleet asks ``check`` per command, Notifications ``check_pairs`` per fan-out round; both
reuse an answer for ``ttl`` seconds. The cache keeps at most ``max_entries`` decisions
(one more drops them all, so a replica's memory stays bounded whatever the number of
users and mowers), shares one lookup among concurrent misses of a decision, and forgets
everything on ``forget()``: a service calls it when ``identity.grants.changed`` arrives,
and an answer loaded across it is handed out but not kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from mowdeck.authz._ports import Authorizer
from mowdeck.kit.singleflight import MAX_ENTRIES, SingleFlight

__all__ = ["DecisionCache"]

Decision = tuple[str, str, str]
"""``(user, relation, object)``."""


class DecisionCache:
    """``authorizer``'s answers for ``ttl`` seconds (0: none kept), at most ``max_entries``."""

    def __init__(
        self,
        authorizer: Authorizer,
        ttl: float,
        *,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._authorizer = authorizer
        self._decisions: SingleFlight[Decision, bool] = SingleFlight(
            ttl, clock, max_entries=max_entries
        )

    async def check(self, user: str, relation: str, object: str) -> bool:
        """Whether ``user`` has ``relation`` on ``object``: cached, or asked once however
        many ask at the same time."""
        return await self._decisions.get(
            (user, relation, object), lambda: self._authorizer.check(user, relation, object)
        )

    async def check_pairs(
        self, pairs: Sequence[tuple[str, str]], relation: str
    ) -> dict[tuple[str, str], bool]:
        """``check`` for many ``(user, object)`` pairs: the cached ones, and one
        ``check_pairs`` round trip for the rest."""
        decisions = self._decisions
        known = decisions.fresh((user, relation, obj) for user, obj in pairs)
        answers = {(user, obj): allowed for (user, _, obj), allowed in known.items()}
        ask = [pair for pair in dict.fromkeys(pairs) if pair not in answers]
        if ask:
            generation = decisions.generation
            asked = await self._authorizer.check_pairs(ask, relation)
            found = {pair: asked.get(pair, False) for pair in ask}
            answers.update(found)
            if decisions.ttl > 0:
                stored = {(user, relation, obj): ok for (user, obj), ok in found.items()}
                decisions.refresh(stored, generation)
        return answers

    def forget(self) -> None:
        """Drop every decision (grants changed); answers being loaded are not kept."""
        self._decisions.forget()
