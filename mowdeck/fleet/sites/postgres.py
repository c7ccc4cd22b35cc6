"""``SiteRepository`` on ``fleet_sites``, ``fleet_site_areas`` and the registry's events
(``fleet_outbox``): each change and its event in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from contracts.v1 import Area, MowerRegistration, SiteAreas
from mowdeck.fleet.errors import SiteNotFoundError, VersionConflictError
from mowdeck.fleet.ports import RegistryEvent
from mowdeck.fleet.postgres import EVENT_INSERT as _EVENT_INSERT
from mowdeck.fleet.postgres import MOWER_COLUMNS, failed
from mowdeck.fleet.postgres import event_args as _event_args
from mowdeck.fleet.postgres import mower_record as _record
from mowdeck.fleet.sites.model import AreasRecord, Location, SiteRecord

__all__ = ["PostgresSiteRepository"]

_SITE = "site_id, account_id, name, timezone, lat, lon, version, created_at, updated_at"
_areas = msgspec.json.Decoder(list[Area])
_PAGE = (
    f"SELECT {_SITE} FROM fleet_sites WHERE account_id = $1"  # noqa: S608 - constant columns
    " AND ($2::uuid[] IS NULL OR site_id = ANY($2::uuid[]))"
    " AND (name, site_id) > ($3, $4) ORDER BY name, site_id LIMIT $5"
)
_AREAS_PAGE = (
    "SELECT s.site_id, s.account_id, coalesce(a.version, 0) AS version, a.areas"
    " FROM fleet_sites s LEFT JOIN fleet_site_areas a USING (site_id)"
    " WHERE s.site_id > $1 ORDER BY s.site_id LIMIT $2"
)


def _site(row: asyncpg.Record) -> SiteRecord:
    return SiteRecord(
        site_id=row["site_id"],
        account_id=row["account_id"],
        name=row["name"],
        timezone=row["timezone"],
        location=Location(lat=row["lat"], lon=row["lon"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        version=row["version"],
    )


def _decoded(raw: str | None) -> list[Area]:
    return [] if raw is None else _areas.decode(raw)


class PostgresSiteRepository:
    """Sites in PostgreSQL; the pool is the caller's."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(self, record: SiteRecord, event: RegistryEvent) -> None:
        """Store a new site and its event in one transaction."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    f"INSERT INTO fleet_sites ({_SITE}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)",  # noqa: S608
                    *self._values(record),
                )
                await conn.execute(_EVENT_INSERT, *_event_args(event))
        except asyncpg.UniqueViolationError as err:
            raise VersionConflictError(f"site {record.site_id} exists") from err
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("sites", err) from err

    @staticmethod
    def _values(r: SiteRecord) -> tuple[Any, ...]:
        loc = r.location
        return (r.site_id, r.account_id, r.name, r.timezone, loc.lat, loc.lon, r.version,
                r.created_at, r.updated_at)  # fmt: skip

    async def get(self, site_id: uuid.UUID) -> SiteRecord | None:
        """One site, or None."""
        rows = await self._fetch(f"SELECT {_SITE} FROM fleet_sites WHERE site_id = $1", site_id)  # noqa: S608
        return _site(rows[0]) if rows else None

    async def page_of_account(
        self,
        account_id: uuid.UUID,
        site_ids: Sequence[uuid.UUID] | None,
        after: tuple[str, uuid.UUID] | None,
        limit: int,
    ) -> list[SiteRecord]:
        """Up to ``limit`` of the account's sites behind ``after`` (keyset, no OFFSET)."""
        name, site_id = after if after is not None else ("", uuid.UUID(int=0))
        ids = None if site_ids is None else list(site_ids)
        rows = await self._fetch(_PAGE, account_id, ids, name, site_id, limit)
        return [_site(r) for r in rows]

    async def update(self, record: SiteRecord, event: RegistryEvent, expected_version: int) -> None:
        """Replace a site if still at ``expected_version``, with its event."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                status = await conn.execute(
                    "UPDATE fleet_sites SET name = $2, timezone = $3, lat = $4, lon = $5,"
                    " version = $6, updated_at = $7 WHERE site_id = $1 AND version = $8",
                    record.site_id,
                    record.name,
                    record.timezone,
                    record.location.lat,
                    record.location.lon,
                    record.version,
                    record.updated_at,
                    expected_version,
                )
                if status.endswith(" 0"):
                    raise VersionConflictError(f"site {record.site_id} changed meanwhile")
                await conn.execute(_EVENT_INSERT, *_event_args(event))
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("sites", err) from err

    async def remove(
        self,
        site_id: uuid.UUID,
        event: RegistryEvent,
        expected_version: int,
        *,
        now: datetime,
        mower_event: Callable[[MowerRegistration], RegistryEvent],
    ) -> list[MowerRegistration]:
        """Delete a site; its mowers lose their site, each with a ``mower.updated``."""
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(
                    "UPDATE fleet_mowers SET site_id = NULL, version = version + 1,"  # noqa: S608 - constant columns
                    f" updated_at = $2 WHERE site_id = $1 RETURNING {MOWER_COLUMNS}",
                    site_id,
                    now,
                )
                version = await conn.fetchval(
                    "DELETE FROM fleet_sites WHERE site_id = $1 RETURNING version", site_id
                )
                if version is None:
                    raise SiteNotFoundError(f"site {site_id} does not exist")
                if version != expected_version:
                    raise VersionConflictError(f"site {site_id} changed meanwhile")
                await conn.execute(_EVENT_INSERT, *_event_args(event))
                left = sorted((_record(r).registration for r in rows), key=lambda m: m.mower_id)
                for registration in left:
                    await conn.execute(_EVENT_INSERT, *_event_args(mower_event(registration)))
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("sites", err) from err
        return left

    async def mowers_at(self, site_id: uuid.UUID) -> list[uuid.UUID]:
        """The ids of the mowers at a site (``fleet_mowers_site``)."""
        rows = await self._fetch(
            "SELECT mower_id FROM fleet_mowers WHERE site_id = $1 ORDER BY mower_id", site_id
        )
        return [r["mower_id"] for r in rows]

    async def put_areas(
        self,
        site_id: uuid.UUID,
        areas: list[Area],
        *,
        now: datetime,
        event: Callable[[AreasRecord], RegistryEvent],
    ) -> AreasRecord:
        """Replace a site's areas one version up, with the event of the result."""
        body = msgspec.json.encode(areas).decode()
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                # The site's row lock orders concurrent PUTs: versions follow commit order.
                account = await conn.fetchval(
                    "SELECT account_id FROM fleet_sites WHERE site_id = $1 FOR UPDATE", site_id
                )
                if account is None:
                    raise SiteNotFoundError(f"site {site_id} does not exist")
                version = await conn.fetchval(
                    "INSERT INTO fleet_site_areas (site_id, version, areas, updated_at)"
                    " VALUES ($1, 1, $2::jsonb, $3) ON CONFLICT (site_id) DO UPDATE SET"
                    " version = fleet_site_areas.version + 1, areas = excluded.areas,"
                    " updated_at = excluded.updated_at RETURNING version",
                    site_id,
                    body,
                    now,
                )
                record = AreasRecord(site_id, account, version, areas, now)
                await conn.execute(_EVENT_INSERT, *_event_args(event(record)))
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("areas", err) from err
        return record

    async def get_areas(self, site_id: uuid.UUID) -> AreasRecord | None:
        """A site's areas (version 0 before any), or None without the site."""
        rows = await self._fetch(
            "SELECT s.account_id, coalesce(a.version, 0) AS version, a.areas, a.updated_at"
            " FROM fleet_sites s LEFT JOIN fleet_site_areas a USING (site_id)"
            " WHERE s.site_id = $1",
            site_id,
        )
        if not rows:
            return None
        row = rows[0]
        return AreasRecord(
            site_id, row["account_id"], row["version"], _decoded(row["areas"]), row["updated_at"]
        )

    async def areas_page(self, after: uuid.UUID | None, limit: int) -> list[SiteAreas]:
        """Every site's areas by site id behind ``after``."""
        rows = await self._fetch(_AREAS_PAGE, after or uuid.UUID(int=0), limit)
        return [
            SiteAreas(
                site_id=r["site_id"],
                account_id=r["account_id"],
                version=r["version"],
                areas=_decoded(r["areas"]),
            )
            for r in rows
        ]

    async def announce(self, event: RegistryEvent) -> None:
        """Store an event of its own."""
        try:
            await self._pool.execute(_EVENT_INSERT, *_event_args(event))
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("events", err) from err

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        try:
            rows: list[asyncpg.Record] = await self._pool.fetch(query, *args)
        except (asyncpg.PostgresError, OSError) as err:
            raise failed("sites", err) from err
        return rows
