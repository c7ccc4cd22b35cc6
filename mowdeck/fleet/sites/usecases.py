"""What Fleet does with sites for a caller: create, read, change, remove; areas; members."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import structlog

from contracts.v1 import EventEnvelope, GrantsChanged, MowerRegistration, encode
from contracts.v1.subjects import event_subject
from mowdeck.authn import Principal
from mowdeck.authz import Tuple, account_object, mower_object, site_object, user_ref
from mowdeck.fleet import rules
from mowdeck.fleet.caches import CachedAuthorizer, RecordCache
from mowdeck.fleet.errors import ForbiddenError, SiteNotFoundError
from mowdeck.fleet.events_relay import EventsRelay
from mowdeck.fleet.ports import RegistryEvent
from mowdeck.fleet.sites import validation
from mowdeck.fleet.sites.model import (
    SITE_ROLES,
    AreasRecord,
    MemberView,
    SiteCreate,
    SitePatch,
    SiteRecord,
)
from mowdeck.fleet.sites.ports import SiteRepository

__all__ = ["Sites", "grants_changed", "site_event"]

log = structlog.get_logger("mowdeck.fleet.sites")


def site_event(
    event_type: str, payload: Any, account_id: uuid.UUID | None, now: datetime
) -> RegistryEvent:
    """An event of a site (or a grant on one), stored with its change."""
    event = EventEnvelope.new(
        event_type, payload, producer=rules.PRODUCER, now=now, account_id=account_id
    )
    return RegistryEvent(event.id, event_subject(event_type), encode(event), now)


def grants_changed(
    account_id: uuid.UUID | None, obj: str, now: datetime, user_id: str | None = None
) -> RegistryEvent:
    """``identity.grants.changed`` for a change of who reaches ``obj`` (a site, a mower)."""
    changed = GrantsChanged(account_id=account_id, user_id=user_id, object=obj)
    return site_event("identity.grants.changed", changed, account_id, now)


@dataclass
class Sites:
    """The site use cases behind the routes; every collaborator is passed in."""

    repository: SiteRepository
    authorizer: CachedAuthorizer
    records: RecordCache
    relay: EventsRelay
    clock: Callable[[], datetime]

    async def _may(self, who: Principal, relation: str, site_id: uuid.UUID) -> SiteRecord:
        user, site = user_ref(who.user_id), site_object(site_id)
        allowed = await self.authorizer.check(user, relation, site)
        visible = allowed or await self.authorizer.check(user, "can_view", site)
        record = await self.repository.get(site_id) if visible else None
        # A tuple left behind must not reach a site of another account.
        if record is None or record.account_id != who.account_id:
            raise SiteNotFoundError(f"site {site_id} does not exist")
        if not allowed:
            raise ForbiddenError(f"this needs {relation} on the site")
        return record

    async def _admin(self, who: Principal) -> None:
        account = account_object(who.account_id)
        if not await self.authorizer.check(user_ref(who.user_id), "can_admin_mowers", account):
            raise ForbiddenError("creating sites needs the account's admin role")

    async def create(self, who: Principal, body: SiteCreate) -> SiteRecord:
        """A new site in the caller's account."""
        await self._admin(who)
        validation.check_timezone(body.timezone)
        now = self.clock()
        record = SiteRecord(
            uuid.uuid4(), who.account_id, body.name, body.timezone, body.location, now, now
        )
        # The account tuple first: a site in the table is always reachable by its admins.
        await self.authorizer.write(
            [Tuple(account_object(who.account_id), "account", site_object(record.site_id))]
        )
        await self.repository.add(
            record, site_event("site.created", record.ref(), who.account_id, now)
        )
        self.relay.wake()
        log.info("site created", site_id=str(record.site_id))
        return record

    async def get(self, who: Principal, site_id: uuid.UUID) -> SiteRecord:
        """One site the caller may view."""
        return await self._may(who, "can_view", site_id)

    async def visible_page(
        self, who: Principal, after: tuple[str, uuid.UUID] | None, limit: int
    ) -> tuple[list[SiteRecord], bool]:
        """A page of the caller's account's sites the caller may view, and whether more follow."""
        objects = await self.authorizer.list_objects(user_ref(who.user_id), "can_view", "site")
        ids = [uuid.UUID(o.partition(":")[2]) for o in objects]
        rows = await self.repository.page_of_account(who.account_id, ids, after, limit + 1)
        return rows[:limit], len(rows) > limit

    async def update(self, who: Principal, site_id: uuid.UUID, patch: SitePatch) -> SiteRecord:
        """Rename a site, move it, or change its time zone."""
        current = await self._may(who, "can_admin", site_id)
        name, timezone, location = validation.apply_patch(current, patch)
        now = self.clock()
        record = replace(
            current, name=name, timezone=timezone, location=location, updated_at=now,
            version=current.version + 1,
        )  # fmt: skip
        event = site_event("site.updated", record.ref(), record.account_id, now)
        await self.repository.update(record, event, current.version)
        self.relay.wake()
        return record

    async def remove(self, who: Principal, site_id: uuid.UUID) -> list[MowerRegistration]:
        """Remove a site and its areas; its mowers stay, without a site."""
        current = await self._may(who, "can_admin", site_id)
        site = site_object(site_id)
        # Who reaches the mowers through the site goes first: a failure after this leaves
        # the site and its admins' tuple, so that the same DELETE can be sent again.
        await self._unreach(site, await self.repository.mowers_at(site_id))
        now = self.clock()
        left = await self.repository.remove(
            site_id,
            site_event("site.removed", current.ref(), current.account_id, now),
            current.version,
            now=now,
            mower_event=lambda r: rules.registry_event("mower.updated", r, now=now),
        )
        await self._unreach(site, [m.mower_id for m in left])  # any that joined meanwhile
        await self.authorizer.delete_object(site)
        for mower in left:
            self.records.forget(mower.mower_id)
        await self._grants_changed(current.account_id, site)
        log.info("site removed", site_id=str(site_id), mowers=len(left))
        return left

    async def _unreach(self, site: str, mowers: list[uuid.UUID]) -> None:
        """Delete the site's role tuples and its mowers' ``site`` tuples."""
        roles = [t for r in SITE_ROLES for t in await self.authorizer.read(relation=r, object=site)]
        links = [Tuple(site, "site", mower_object(m)) for m in mowers]
        if roles or links:
            await self.authorizer.write((), [*roles, *links])

    async def put_areas(self, who: Principal, site_id: uuid.UUID, document: Any) -> AreasRecord:
        """Replace every area of a site with the FeatureCollection's, one version up."""
        current = await self._may(who, "can_admin", site_id)
        areas = validation.parse_areas(document)
        now = self.clock()
        record = await self.repository.put_areas(
            site_id,
            areas,
            now=now,
            event=lambda r: site_event("site.areas_changed", r.payload(), current.account_id, now),
        )
        self.relay.wake()
        log.info("site areas changed", site_id=str(site_id), version=record.version)
        return record

    async def get_areas(self, who: Principal, site_id: uuid.UUID) -> AreasRecord:
        """A site's areas with their version."""
        await self._may(who, "can_view", site_id)
        found = await self.repository.get_areas(site_id)
        if found is None:
            raise SiteNotFoundError(f"site {site_id} does not exist")
        return found

    async def members(self, who: Principal, site_id: uuid.UUID) -> list[MemberView]:
        """The users with a role on the site (admins of the site's account only)."""
        await self._may(who, "can_admin", site_id)
        found: list[MemberView] = []
        for role in SITE_ROLES:
            for t in await self.authorizer.read(relation=role, object=site_object(site_id)):
                if t.user.startswith("user:"):
                    found.append(MemberView(user_id=t.user.partition(":")[2], role=role))  # type: ignore[arg-type]
        return sorted(found, key=lambda m: (m.user_id, m.role))

    async def set_member(
        self, who: Principal, site_id: uuid.UUID, user_id: str, role: str | None
    ) -> None:
        """Make ``user_id`` exactly ``role`` of the site (None: no role on it any more)."""
        current = await self._may(who, "can_admin", site_id)
        user, site, account = (
            user_ref(user_id),
            site_object(site_id),
            account_object(current.account_id),
        )
        # Written again or deleted when absent: both are no-ops in either adapter.
        writes = [] if role is None else [Tuple(user, role, site), Tuple(user, "member", account)]
        await self.authorizer.write(writes, [Tuple(user, r, site) for r in SITE_ROLES if r != role])
        await self._grants_changed(current.account_id, site, user_id)

    async def _grants_changed(
        self, account_id: uuid.UUID, site: str, user_id: str | None = None
    ) -> None:
        await self.repository.announce(grants_changed(account_id, site, self.clock(), user_id))
        self.relay.wake()
