"""Mowers, a site and schedules written straight into Fleet's tables (tests, bench)."""

from __future__ import annotations

import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

import asyncpg

from mowdeck.fleet.schedules.codec import tasks_text
from mowdeck.fleet.schedules.plan import first_due
from mowdeck.fleet.schedules.slots import Task

__all__ = ["add_site", "seed_mowers", "seed_schedules"]


async def add_site(
    pool: asyncpg.Pool, account: uuid.UUID, timezone: str, now: datetime
) -> uuid.UUID:
    """A site of ``account`` in ``timezone``."""
    site = uuid.uuid4()
    await pool.execute(
        "INSERT INTO fleet_sites (site_id, account_id, name, timezone, lat, lon, created_at,"
        " updated_at) VALUES ($1, $2, $3, $4, 52.5, 13.4, $5, $5)",
        site,
        account,
        f"site {site.hex[:6]}",
        timezone,
        now,
    )
    return site


async def seed_mowers(
    pool: asyncpg.Pool, account: uuid.UUID, sites: list[uuid.UUID], count: int, now: datetime
) -> list[uuid.UUID]:
    """``count`` mowers of ``account`` spread over ``sites`` (COPY: fast at fleet size)."""
    mowers = [uuid.uuid4() for _ in range(count)]
    records = [
        (m, account, f"mower {i}", "simulator", now, now, sites[i % len(sites)] if sites else None)
        for i, m in enumerate(mowers)
    ]
    async with pool.acquire() as conn:
        await conn.copy_records_to_table(
            "fleet_mowers",
            records=records,
            columns=[
                "mower_id",
                "account_id",
                "name",
                "connection_kind",
                "created_at",
                "updated_at",
                "site_id",
            ],
        )
    return mowers


async def seed_schedules(  # noqa: PLR0917 - the seed of one fleet
    pool: asyncpg.Pool,
    account: uuid.UUID,
    mowers: list[uuid.UUID],
    tasks: list[Task],
    zone_name: str,
    now: datetime,
) -> None:
    """Every mower gets ``tasks`` (their zone is their site's, ``zone_name`` alike)."""
    due = first_due(tasks, ZoneInfo(zone_name), now)
    assert due is not None
    text = tasks_text(tasks)
    rows = [
        (
            m,
            account,
            True,
            text,
            None,
            due.at,
            due.kind,
            due.slot.start,
            due.slot.end,
            due.slot.task,
            due.slot.work_area,
            now,
        )
        for m in mowers
    ]
    async with pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO fleet_schedules (mower_id, account_id, enabled, tasks, timezone, due_at,"
            " due_kind, slot_start, slot_end, slot_task, slot_area, updated_at)"
            " VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12)",
            rows,
        )
