"""What the schedule API does for a caller: set and read schedules, park and resume
mowers and sites, restrict sites. Rights as for commands: viewers read, operators act."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog

from contracts.v1 import CommandEnvelope
from mowdeck.authn import Principal
from mowdeck.authz import site_object, user_ref
from mowdeck.fleet.errors import (
    ForbiddenError,
    InvalidRequestError,
    MowerNotFoundError,
    SiteNotFoundError,
)
from mowdeck.fleet.schedules.outbox import Publishes, issue, publish_all
from mowdeck.fleet.schedules.plan import (
    Decision,
    Restriction,
    ScheduleState,
    decide_park,
    decide_resume,
    dock_for_restriction,
    first_due,
    next_start,
)
from mowdeck.fleet.schedules.ports import (
    Claim,
    Mowers,
    ScheduleStore,
    SiteDirectory,
    StoredSchedule,
)
from mowdeck.fleet.schedules.rules import (
    Override,
    RestrictionRequest,
    ScheduleRequest,
    restriction_until,
    spec_of,
    tasks_of,
    zone_of,
)
from mowdeck.fleet.schedules.views import (
    OverrideView,
    RestrictionView,
    ScheduleView,
    restricted_of,
    restriction_view,
    slot_view,
)
from mowdeck.fleet.usecases import Fleet

__all__ = ["Schedules"]

log = structlog.get_logger("mowdeck.fleet.schedules")
_RECENT = 20


@dataclass
class Schedules:
    """The schedule use cases; mowers are authorized through ``fleet``."""

    fleet: Fleet
    store: ScheduleStore
    sites: SiteDirectory
    publisher: Publishes
    clock: Callable[[], datetime]

    async def put(
        self, who: Principal, mower_id: uuid.UUID, request: ScheduleRequest
    ) -> ScheduleView:
        """Set a mower's schedule (in its site's time zone, else the body's)."""
        record = await self.fleet.allowed(who, mower_id, "can_operate")
        tasks = tasks_of(request.tasks)
        site = await self.sites.site_of(mower_id)
        if site is not None:
            if request.timezone is not None and request.timezone != site.timezone:
                raise InvalidRequestError(
                    "timezone",
                    f"`timezone`: the mower's site keeps its schedule in {site.timezone};"
                    " leave `timezone` out",
                )
            zone = zone_of(site.timezone)
        elif request.timezone is None:
            raise InvalidRequestError(
                "timezone", "`timezone` is required for a mower without a site (an IANA name)"
            )
        else:
            zone = zone_of(request.timezone)
        now = self.clock()
        stored = StoredSchedule(
            mower_id,
            record.registration.account_id,
            request.enabled,
            tasks,
            site.timezone if site is not None else request.timezone,  # kept if the site goes
            now,
        )
        due = first_due(tasks, zone, now) if request.enabled else None
        state = ScheduleState(mower_id, stored.account_id, request.enabled, tasks, zone, due)
        await self.store.put(stored, state)
        log.info("schedule set", mower_id=str(mower_id), tasks=len(tasks), enabled=request.enabled)
        return await self._view(mower_id, now)

    async def view(self, who: Principal, mower_id: uuid.UUID) -> ScheduleView:
        """A mower's schedule with its next start and what holds it back (a mower never
        given one has an empty one, disabled)."""
        record = await self.fleet.allowed(who, mower_id, "can_view")
        return await self._view(mower_id, self.clock(), record.updated_at)

    async def _view(
        self, mower_id: uuid.UUID, now: datetime, since: datetime | None = None
    ) -> ScheduleView:
        state = await self.store.get(mower_id, now)
        stored = await self.store.stored(mower_id)
        site = await self.sites.site_of(mower_id)
        if state is None or stored is None:
            if since is None:
                raise MowerNotFoundError(f"mower {mower_id} has no schedule")
            return ScheduleView(
                mower_id=mower_id,
                site_id=None if site is None else site.site_id,
                enabled=False,
                timezone="UTC" if site is None else site.timezone,
                tasks=[],
                next_start=None,
                restricted=None,
                recent_slots=[],
                updated_at=since,
            )
        slots = await self.store.recent_slots(mower_id, _RECENT)
        return ScheduleView(
            mower_id=mower_id,
            site_id=None if site is None else site.site_id,
            enabled=state.enabled,
            timezone=state.zone.key,
            tasks=[spec_of(t) for t in state.tasks],
            next_start=next_start(state, now),
            restricted=restricted_of(state, now),
            recent_slots=[slot_view(s) for s in slots],
            updated_at=stored.updated_at,
        )

    async def override_mower(
        self, who: Principal, mower_id: uuid.UUID, override: Override
    ) -> OverrideView:
        """Park a mower (docking it now) or resume its schedule."""
        await self.fleet.allowed(who, mower_id, "can_operate")
        view = await self._override(who, Mowers(mower_ids=[mower_id]), override, every=True)
        if view.mowers == 0:
            raise MowerNotFoundError(f"mower {mower_id} has no schedule")
        return view

    async def override_site(
        self, who: Principal, site_id: uuid.UUID, override: Override
    ) -> OverrideView:
        """Park or resume every scheduled mower of a site (docking those in a slot)."""
        await self._site(who, site_id, "can_operate")
        return await self._override(who, Mowers(site_id=site_id), override, every=False)

    async def _override(
        self, who: Principal, mowers: Mowers, override: Override, *, every: bool
    ) -> OverrideView:
        now = self.clock()
        sent: list[tuple[CommandEnvelope, bytes]] = []
        async with self.store.lock(mowers, now) as claim:
            for state in claim.states:
                if override == "resume_schedule":
                    decision = decide_resume(state)
                else:
                    decision = decide_park(state, override, now)
                    if not every and decision.slot is None:  # a site docks who mows in a slot
                        decision = replace(decision, order=None)
                self._issue(who, claim, state, decision, sent=sent, now=now)
        await publish_all(self.publisher, self.store, sent)
        log.info("schedule override", override=override, mowers=len(claim.states))
        return OverrideView(
            override=override, mowers=len(claim.states), command_ids=[e.command_id for e, _ in sent]
        )

    def _issue(
        self,
        who: Principal,
        claim: Claim,
        state: ScheduleState,
        decision: Decision,
        *,
        sent: list[tuple[CommandEnvelope, bytes]],
        now: datetime,
    ) -> None:
        made = None
        if decision.order is not None:
            ttl = timedelta(seconds=self.fleet.settings.command_default_ttl_seconds)
            envelope, made = issue(
                state, decision.order, issued_by=user_ref(who.user_id), now=now, ttl=ttl
            )
            sent.append((envelope, made.body))
        claim.decide(state, decision, made)

    async def _site(self, who: Principal, site_id: uuid.UUID, relation: str) -> None:
        """404 for a site the caller cannot see (or of another account), 403 for one they
        see without ``relation`` (``can_view`` or ``can_operate`` on the site, which its
        account's roles and its own members hold)."""
        user, site = user_ref(who.user_id), site_object(site_id)
        authorizer = self.fleet.authorizer
        allowed = await authorizer.check(user, relation, site)
        visible = allowed or await authorizer.check(user, "can_view", site)
        account = await self.sites.account_of(site_id) if visible else None
        if account is None or account != who.account_id:
            raise SiteNotFoundError(f"site {site_id} does not exist")
        if not allowed:
            raise ForbiddenError(f"this needs {relation} on the site")

    async def restrict(
        self, who: Principal, site_id: uuid.UUID, request: RestrictionRequest
    ) -> RestrictionView:
        """Hold back every slot of a site's mowers until ``until``; dock those mowing now."""
        await self._site(who, site_id, "can_operate")
        now = self.clock()
        until = restriction_until(request, now)
        restriction = Restriction(
            uuid.uuid4(), site_id, request.reason, until, now, user_ref(who.user_id)
        )
        sent: list[tuple[CommandEnvelope, bytes]] = []
        async with self.store.lock(Mowers(site_id=site_id), now) as claim:
            claim.restriction = restriction
            for state in claim.states:
                self._issue(
                    who,
                    claim,
                    state,
                    dock_for_restriction(state, restriction, now),
                    sent=sent,
                    now=now,
                )
        await publish_all(self.publisher, self.store, sent)
        log.info("site restricted", site_id=str(site_id), docked=len(sent))
        return restriction_view(restriction, [e.command_id for e, _ in sent])

    async def restrictions(self, who: Principal, site_id: uuid.UUID) -> list[RestrictionView]:
        """A site's restrictions that have not ended."""
        await self._site(who, site_id, "can_view")
        return [restriction_view(r) for r in await self.store.restrictions(site_id, self.clock())]

    async def lift(self, who: Principal, site_id: uuid.UUID, restriction_id: uuid.UUID) -> None:
        """End a restriction now (slots held back stay so; the next ones start)."""
        await self._site(who, site_id, "can_operate")
        if not await self.store.remove_restriction(site_id, restriction_id):
            raise SiteNotFoundError(f"site {site_id} has no restriction {restriction_id}")
