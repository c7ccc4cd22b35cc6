"""What the caller of the Notifications API may see: their account's mowers they can view.

ADR 0022: a user who can view nothing cannot use the API at all (403). "Nothing" is
counted in the token's account, as Telemetry scopes its reads: a viewer (or more) of
the account may view every mower of it, even before one is registered; anyone else may
view the mowers ``list_objects`` names that the mower directory places in the account.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from mowdeck.authn import Principal
from mowdeck.authz import (
    Authorizer,
    AuthzUnavailableError,
    DecisionCache,
    account_object,
    user_ref,
)
from mowdeck.kit.http import Problem, authz_unavailable
from mowdeck.kit.singleflight import SingleFlight

__all__ = ["Access", "AccessCache", "MowerAccount", "access_of", "caller_access"]

log = structlog.get_logger("mowdeck.notifications.inbox.access")

MowerAccount = Callable[[uuid.UUID], uuid.UUID | None]
"""The account of a mower the service knows, from its Fleet-seeded directory."""


@dataclass(frozen=True, slots=True)
class Access:
    """The caller's view: the whole account, or the listed mowers of it."""

    user_id: str
    account_id: uuid.UUID
    whole_account: bool
    mowers: frozenset[uuid.UUID]
    mower_account: MowerAccount

    def can_view(self, mower_id: uuid.UUID) -> bool:
        """Whether ``mower_id`` is a mower of the caller's account that they may view."""
        if self.mower_account(mower_id) != self.account_id:
            return False
        return self.whole_account or mower_id in self.mowers


def _mower_ids(objects: Iterable[str]) -> set[uuid.UUID]:
    ids: set[uuid.UUID] = set()
    for ref in objects:
        try:
            ids.add(uuid.UUID(ref.partition(":")[2]))
        except ValueError:  # a tuple naming a mower by something that is no id matches none
            log.debug("visible object skipped: not a mower id", object=ref)
    return ids


async def caller_access(
    caller: Principal, authorizer: Authorizer, mower_account: MowerAccount
) -> Access:
    """The caller's ``Access``; a 403 problem when they can view nothing in their account."""
    user = user_ref(caller.user_id)
    try:
        if await authorizer.check(user, "can_view_mowers", account_object(caller.account_id)):
            return Access(caller.user_id, caller.account_id, True, frozenset(), mower_account)
        listed = _mower_ids(await authorizer.list_objects(user, "can_view", "mower"))
    except AuthzUnavailableError as err:
        raise authz_unavailable() from err
    mine = frozenset(m for m in listed if mower_account(m) == caller.account_id)
    if not mine:
        raise Problem(
            403,
            "Forbidden",
            "you may view no mower of this account, so there is nothing to be notified about",
            type_="forbidden",
        )
    return Access(caller.user_id, caller.account_id, False, mine, mower_account)


class AccessCache:
    """Callers' ``Access``, kept as long as the ``can_view`` decisions are (the decision
    cache's lifetime, ``MOWDECK_NOTIFICATIONS_DECISION_CACHE_SECONDS``): a console that
    polls the inbox and the alarms does not list the caller's mowers on every request.
    ``forget()`` drops them together with the cached decisions when grants change. A
    refusal (403) is not kept."""

    def __init__(
        self,
        authorizer: Authorizer,
        mower_account: MowerAccount,
        decisions: DecisionCache,
        ttl: float,
        *,
        max_entries: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._authorizer = authorizer
        self._mower_account = mower_account
        self._decisions = decisions
        self._access: SingleFlight[tuple[str, uuid.UUID], Access] = SingleFlight(
            ttl, clock, max_entries=max_entries
        )

    async def of(self, caller: Principal) -> Access:
        """The caller's ``Access`` (``caller_access``), cached."""
        return await self._access.get(
            (caller.user_id, caller.account_id),
            lambda: caller_access(caller, self._authorizer, self._mower_account),
        )

    def forget(self) -> None:
        """Grants changed: drop every cached ``Access`` and decision."""
        self._decisions.forget()
        self._access.forget()


async def access_of(
    caller: Principal,
    cache: AccessCache | None,
    authorizer: Authorizer,
    mower_account: MowerAccount,
) -> Access:
    """The caller's ``Access``: from ``cache`` when the API keeps one, else asked now."""
    if cache is not None:
        return await cache.of(caller)
    return await caller_access(caller, authorizer, mower_account)
