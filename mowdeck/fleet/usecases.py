"""What Fleet does for a caller: register, read, change, remove mowers; issue commands."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, cast

import msgspec
import structlog
from prometheus_client import CollectorRegistry, Counter

from contracts.v1 import CommandEnvelope, CommandResult, Connection, MowerRegistration
from contracts.v1 import CommandStatus as ResultStatus
from mowdeck.authn import Principal
from mowdeck.authz import Tuple, account_object, mower_object, site_object, user_ref
from mowdeck.devices.endpoints import EndpointPolicy
from mowdeck.fleet import rules
from mowdeck.fleet.caches import CachedAuthorizer, RecordCache
from mowdeck.fleet.errors import (
    CommandNotFoundError,
    EndpointTakenError,
    ForbiddenError,
    InvalidRequestError,
    MowerExistsError,
    MowerNotFoundError,
    VersionConflictError,
)
from mowdeck.fleet.events_relay import EventsRelay
from mowdeck.fleet.issuing import CommandJournal, CommandPublisher
from mowdeck.fleet.ports import (
    AuditEntry,
    AuditQuery,
    AuditTrail,
    CommandLog,
    CommandRecord,
    MowerRecord,
    MowerRepository,
)
from mowdeck.fleet.results import ResultWaiters
from mowdeck.fleet.rules import CommandRequest, PatchRequest, RegisterRequest
from mowdeck.fleet.settings import FleetSettings
from mowdeck.fleet.sites.ports import SiteRepository
from mowdeck.fleet.sites.usecases import grants_changed
from mowdeck.kit.logging import bind

__all__ = ["CommandStatus", "Fleet", "FleetMetrics"]

log = structlog.get_logger("mowdeck.fleet")
_RETRIES = 3
# A waiter settles its command once its expiry plus the grace has passed.
_JUST_AFTER = timedelta(microseconds=1)


class FleetMetrics:
    """Counters of the registry and of issued commands."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.commands = Counter(
            "mowdeck_fleet_commands_issued_total", "Commands published", ["kind"], registry=registry
        )
        self.changes = Counter(
            "mowdeck_fleet_registry_changes_total", "Registry changes", ["event"], registry=registry
        )
        self.caches_dropped = Counter(
            "mowdeck_fleet_caches_dropped_total",
            "Times this replica dropped its cached decisions and records (a mower event or"
            " identity.grants.changed)",
            registry=registry,
        )
        self._issued: dict[str, Any] = {}

    def issued(self, kind: str) -> None:
        """Count one published command (the labelled child is looked up once per kind)."""
        child = self._issued.get(kind)
        if child is None:
            child = self._issued[kind] = self.commands.labels(kind)
        child.inc()


@dataclass(frozen=True)
class CommandStatus:
    """A command and the statuses seen so far."""

    command: CommandRecord
    statuses: list[dict[str, object]] = field(default_factory=list)


@dataclass
class Fleet:
    """The use cases behind the routes; every collaborator is passed in."""

    settings: FleetSettings
    repository: MowerRepository
    sites: SiteRepository
    command_log: CommandLog
    audit_trail: AuditTrail
    authorizer: CachedAuthorizer
    records: RecordCache
    relay: EventsRelay
    journal: CommandJournal
    publisher: CommandPublisher
    waiters: ResultWaiters
    connection_kinds: Collection[str]
    endpoints: EndpointPolicy
    metrics: FleetMetrics
    clock: Callable[[], datetime]

    # Registry

    async def register(
        self, who: Principal, request: RegisterRequest
    ) -> tuple[MowerRegistration, bool]:
        """Register a mower in the caller's account; returns it and whether it is new."""
        account = account_object(who.account_id)
        if not await self.authorizer.check(user_ref(who.user_id), "can_admin_mowers", account):
            raise ForbiddenError("registering mowers needs the account's admin role")
        registration = rules.new_registration(
            request, who.account_id, self.connection_kinds, self.endpoints
        )
        now = self.clock()
        record = MowerRecord(
            registration,
            created_at=now,
            updated_at=now,
            endpoint_key=self.endpoints.key(registration.connection),
        )
        event = rules.registry_event("mower.registered", registration, now=now)
        created = True
        try:
            await self.repository.add(record, event)
        except (MowerExistsError, EndpointTakenError) as err:
            existing = await self.repository.get(registration.mower_id)
            # A repeated request is answered again (and repairs its tuple); anything else
            # under a taken id, or naming a taken endpoint, is a conflict, whoever owns it.
            if existing is None or existing.registration != registration:
                if isinstance(err, EndpointTakenError):
                    raise self._taken(registration.connection) from err
                raise
            created = False
        else:
            self.relay.wake()
            self.metrics.changes.labels("mower.registered").inc()
        self.records.forget(registration.mower_id)
        await self._own(account, mower_object(registration.mower_id), created=created)
        log.info("mower registered", mower_id=str(registration.mower_id), created=created)
        return registration, created

    def _taken(self, connection: Connection) -> EndpointTakenError:
        # The same answer whoever holds the endpoint: in this account or another.
        option = self.endpoints.device_option(connection.kind)
        field = f"connection.options.{option}" if option else "connection.options"
        return EndpointTakenError(
            field,
            f"`{field}` names a device another mower is registered with; a device can be "
            "registered once (removing that mower frees it)",
        )

    async def _own(self, account: str, mower: str, *, created: bool) -> None:
        """Make ``account`` the only account tuple on ``mower`` (after every register)."""
        stale: list[Tuple] = []
        if created:
            await self.authorizer.delete_object(mower)  # stale grants of a reused id
        else:
            # A retry may follow a first attempt whose cleanup failed: the previous owner's
            # tuple of a reused id can still be there. Groups added since are kept.
            tuples = await self.authorizer.read(relation="account", object=mower)
            stale = [t for t in tuples if t.user != account]
        await self.authorizer.write([Tuple(account, "account", mower)], stale)

    async def _allowed(self, who: Principal, mower_id: uuid.UUID, relation: str) -> MowerRecord:
        user, mower = user_ref(who.user_id), mower_object(mower_id)
        allowed = await self.authorizer.check(user, relation, mower)
        if not allowed and (
            relation == "can_view" or not await self.authorizer.check(user, "can_view", mower)
        ):
            raise MowerNotFoundError(f"mower {mower_id} is not registered")
        record = await self.records.get(mower_id)
        # A tuple left behind by a failed cleanup must not reach a mower of another account.
        if record is None or record.registration.account_id != who.account_id:
            raise MowerNotFoundError(f"mower {mower_id} is not registered")
        if not allowed:
            raise ForbiddenError(f"this needs {relation} on the mower")
        return record

    async def allowed(self, who: Principal, mower_id: uuid.UUID, relation: str) -> MowerRecord:
        """A mower the caller holds ``relation`` on (404 when it may not see it, else 403)."""
        return await self._allowed(who, mower_id, relation)

    async def get(self, who: Principal, mower_id: uuid.UUID) -> MowerRecord:
        """One mower the caller may view."""
        self.records.forget(mower_id)
        return await self._allowed(who, mower_id, "can_view")

    async def visible_page(
        self, who: Principal, after: tuple[str, uuid.UUID] | None, limit: int
    ) -> tuple[list[MowerRecord], bool]:
        """A page of the caller's account's mowers the caller may view, by name then id,
        behind ``after``; and whether more follow."""
        objects = await self.authorizer.list_objects(user_ref(who.user_id), "can_view", "mower")
        ids = [uuid.UUID(o.partition(":")[2]) for o in objects]
        rows = await self.repository.page_of_account(who.account_id, ids, after, limit + 1)
        return rows[:limit], len(rows) > limit

    async def update(self, who: Principal, mower_id: uuid.UUID, patch: PatchRequest) -> MowerRecord:
        """Rename a mower, change its connection or its site."""
        for attempt in range(_RETRIES):
            self.records.forget(mower_id)
            current = await self._allowed(who, mower_id, "can_admin")
            if attempt == 0:  # after the mower's own answer: a 404 says nothing of sites
                await self._check_site(who, patch)
            changed = rules.apply_patch(
                current.registration, patch, self.connection_kinds, self.endpoints
            )
            now = self.clock()
            record = MowerRecord(
                changed,
                current.created_at,
                now,
                current.version + 1,
                endpoint_key=self.endpoints.key(changed.connection),
            )
            event = rules.registry_event("mower.updated", changed, now=now)
            try:
                await self.repository.update(record, event, current.version)
            except EndpointTakenError as err:
                raise self._taken(changed.connection) from err
            except VersionConflictError:
                if attempt == _RETRIES - 1:
                    raise
                continue
            self.records.forget(mower_id)
            self.relay.wake()
            self.metrics.changes.labels("mower.updated").inc()
            if patch.site_id is not msgspec.UNSET:
                await self._site_tuple(mower_id, changed.site_id, record.registration.account_id)
            log.info("mower updated", mower_id=str(mower_id))
            return record
        raise AssertionError("unreachable")  # pragma: no cover

    async def _check_site(self, who: Principal, patch: PatchRequest) -> None:
        if isinstance(patch.site_id, uuid.UUID):
            site = await self.sites.get(patch.site_id)
            if site is None or site.account_id != who.account_id:
                raise InvalidRequestError(
                    "site_id", f"`site_id`: no site {patch.site_id} in this account"
                )

    async def _site_tuple(
        self, mower_id: uuid.UUID, site_id: uuid.UUID | None, account: uuid.UUID
    ) -> None:
        """Make the mower's ``site`` tuple follow its row (after the commit; the tuples may
        live in OpenFGA), then have every service read access again. Whatever an earlier
        attempt left (a failed write) is mended by the next PATCH naming ``site_id``."""
        mower = mower_object(mower_id)
        want = [] if site_id is None else [Tuple(site_object(site_id), "site", mower)]
        have = await self.authorizer.read(relation="site", object=mower)
        writes, stale = [t for t in want if t not in have], [t for t in have if t not in want]
        if not writes and not stale:
            return
        await self.authorizer.write(writes, stale)
        await self.sites.announce(grants_changed(account, mower, self.clock()))
        self.relay.wake()

    async def remove(self, who: Principal, mower_id: uuid.UUID) -> None:
        """Remove a mower, its event and its authorization tuples."""
        for attempt in range(_RETRIES):
            self.records.forget(mower_id)
            current = await self._allowed(who, mower_id, "can_admin")
            event = rules.registry_event("mower.removed", current.registration, now=self.clock())
            try:
                await self.repository.remove(mower_id, event, current.version)
            except VersionConflictError:
                if attempt == _RETRIES - 1:
                    raise
                continue
            break
        self.records.forget(mower_id)
        self.relay.wake()
        self.metrics.changes.labels("mower.removed").inc()
        await self.authorizer.delete_object(mower_object(mower_id))
        log.info("mower removed", mower_id=str(mower_id))

    # Commands

    async def issue(
        self, who: Principal, mower_id: uuid.UUID, request: CommandRequest, wait: float
    ) -> tuple[CommandEnvelope, CommandResult | None]:
        """Publish a command; with ``wait`` > 0 also wait that long for its final result."""
        record = await self._allowed(who, mower_id, "can_operate")
        ttl = rules.command_ttl(
            request.ttl_s,
            default=self.settings.command_default_ttl_seconds,
            maximum=self.settings.command_max_ttl_seconds,
        )
        now = self.clock()
        envelope = rules.issue_command(
            request, record.registration, issued_by=user_ref(who.user_id), now=now, ttl=ttl
        )
        bind(command_id=envelope.command_id)  # for the rest of the request's lines
        body = rules.encode_command(envelope)
        # Recorded before it is published: a 503 for an unreachable database sends
        # nothing, and a 202 means every replica can already answer GET for it.
        await self.journal.record(CommandRecord.of(envelope))
        if wait <= 0:
            await self.publisher.publish(envelope, body)
            self.metrics.issued(envelope.kind)
            return envelope, None
        with self.waiters.expect(envelope.command_id) as future:
            await self.publisher.publish(envelope, body)
            self.metrics.issued(envelope.kind)
            result = await self._wait(envelope, future, wait)
        return envelope, result

    async def _wait(
        self, envelope: CommandEnvelope, future: asyncio.Future[CommandResult], wait: float
    ) -> CommandResult | None:
        """The final result within ``wait`` seconds; past expiry and grace, Fleet's own."""
        grace = timedelta(seconds=self.settings.fleet_command_result_grace_seconds)
        left = (envelope.expires_at + grace - self.clock()).total_seconds()
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(min(wait, left), 0))
        except TimeoutError:
            if wait < left:
                return None
        # No result can come any more: settle the command as a finalizing round would (or
        # read what one recorded meanwhile) and answer that.
        settled = await self.command_log.settle(
            envelope.command_id, envelope.expires_at + _JUST_AFTER, at=self.clock()
        )
        if settled is None:
            return None
        return CommandResult(
            command_id=envelope.command_id,
            mower_id=envelope.mower_id,
            status=cast("ResultStatus", settled.status),
            at=settled.at,
            reason=settled.reason,
        )

    # Audit trail

    async def authorize_audit(self, who: Principal, query: AuditQuery) -> AuditQuery:
        """``query`` within what the caller may read: an admin of the account reads all of
        its trail; a viewer or operator of sites the commands of the mowers at those sites
        (and that they may view); anyone else is refused."""
        user, account = user_ref(who.user_id), account_object(who.account_id)
        if await self.authorizer.check(user, "can_admin_mowers", account):
            return query
        sites = {
            uuid.UUID(s.partition(":")[2])
            for s in await self.authorizer.list_objects(user, "viewer", "site")
        }
        if not sites:
            raise ForbiddenError("the audit trail needs the account's admin role or a site role")
        visible = await self.authorizer.list_objects(user, "can_view", "mower")
        records = await self.repository.get_many([uuid.UUID(o.partition(":")[2]) for o in visible])
        mowers = tuple(
            r.registration.mower_id
            for r in records
            if r.registration.account_id == who.account_id and r.registration.site_id in sites
        )
        return replace(query, mower_ids=mowers)

    async def audit(self, who: Principal, query: AuditQuery) -> list[AuditEntry]:
        """One page of the caller's account's audit trail, newest first."""
        return await self.audit_trail.page(await self.authorize_audit(who, query))

    async def audit_pages(self, query: AuditQuery) -> AsyncGenerator[list[AuditEntry], None]:
        """Every page of ``query`` in turn (``authorize_audit`` first)."""
        while True:
            page = await self.audit_trail.page(query)
            if page:
                yield page
            if len(page) < query.limit:
                return
            last = page[-1]
            query = replace(query, before=(last.issued_at, last.command_id))

    async def command_status(
        self, who: Principal, mower_id: uuid.UUID, command_id: uuid.UUID
    ) -> CommandStatus:
        """A command of a mower the caller may view, with the statuses seen so far."""
        await self._allowed(who, mower_id, "can_view")
        command, statuses = await self.command_log.lookup(command_id)
        if command is None or command.mower_id != mower_id:
            raise CommandNotFoundError(f"no command {command_id} for mower {mower_id}")
        return CommandStatus(
            command,
            [{"status": s.status, "at": s.at, "reason": s.reason} for s in statuses],
        )
