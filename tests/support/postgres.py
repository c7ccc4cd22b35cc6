"""PostgreSQL for tests: a configured server, the local one, or one the tests start."""

from __future__ import annotations

import asyncio
import os
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg

__all__ = ["admin_url", "create_database", "drop_database", "plan_of"]

# No TLS to the local server: asyncpg's TLS upgrade leaks its socket when a connect is
# cancelled, which a later test then sees as an unclosed-socket warning.
LOCAL = "postgresql://postgres@127.0.0.1:5432/postgres?sslmode=disable"


async def _reachable(url: str) -> bool:
    try:
        conn = await asyncpg.connect(url, timeout=2)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    await conn.close()
    return True


_started: dict[str, object] = {}


def admin_url() -> str:
    """A URL with the right to create databases."""
    configured = os.environ.get("MOWDECK_TEST_DATABASE_URL")
    if configured:
        return configured
    if asyncio.run(_reachable(LOCAL)):
        return LOCAL
    if "embedded" not in _started:
        _started["embedded"] = _start_embedded()
    return str(_started["url"])


def _start_embedded() -> object:
    # Last resort on a machine without a server: an embedded PostgreSQL for this run.
    from mowdeck.kit.embedded import EmbeddedPostgres  # noqa: PLC0415 - fallback only

    server = EmbeddedPostgres()
    server.start()
    _started["url"] = server.url
    return server


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def _create(url: str, name: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def _drop(url: str, name: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def create_database(prefix: str = "mowdeck_test") -> str:
    """Create a fresh, empty database and return its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = admin_url()
    asyncio.run(_create(admin, name))
    return _with_database(admin, name)


def drop_database(url: str) -> None:
    """Drop a database made by ``create_database``."""
    name = urlsplit(url).path.lstrip("/")
    asyncio.run(_drop(admin_url(), name))


async def plan_of(pool: asyncpg.Pool, statement: str, *args: object) -> str:
    """The plan PostgreSQL picks for ``statement``, sequential and bitmap scans and sorts
    ruled out: the tables of a test are nearly empty, where any plan is cheap."""
    async with pool.acquire() as conn, conn.transaction():
        for kind in ("seqscan", "bitmapscan", "sort"):
            await conn.execute(f"SET LOCAL enable_{kind} = off")
        rows = await conn.fetch("EXPLAIN " + statement, *args)
    return "\n".join(row[0] for row in rows)
