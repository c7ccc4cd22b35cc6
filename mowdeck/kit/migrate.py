"""Forward-only SQL migrations per service, each in one transaction, under an advisory lock."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import structlog

from mowdeck.errors import MowdeckError
from mowdeck.kit.pg import set_statement_timeout

__all__ = ["Migration", "MigrationError", "discover", "migrate", "redact_dsn", "sql_root"]

log = structlog.get_logger("mowdeck.migrate")

_LOCK_KEY = 0x6D6F7764  # "mowd": one lock for every service's migrations
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_TABLE = """
CREATE TABLE IF NOT EXISTS mowdeck_migrations (
    service     text        NOT NULL,
    version     integer     NOT NULL,
    name        text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (service, version)
)
"""


class MigrationError(MowdeckError):
    """The migrations on disk and in the database disagree, or one failed."""


@dataclass(frozen=True)
class Migration:
    """One SQL file ``sql/<service>/NNNN_name.sql``."""

    service: str
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the file's text."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


def sql_root() -> Path:
    """Where the migrations live: ``MOWDECK_SQL_DIR`` or the repository's ``sql/``."""
    override = os.environ.get("MOWDECK_SQL_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "sql"


def discover(root: Path, services: list[str] | None = None) -> list[Migration]:
    """The migrations under ``root``, by service then version; refuses gaps and strays."""
    if not root.is_dir():
        raise MigrationError(f"no migrations: {root} is not a folder (set MOWDECK_SQL_DIR)")
    found: list[Migration] = []
    dirs = sorted(p for p in root.iterdir() if p.is_dir())
    for service_dir in dirs:
        if services is not None and service_dir.name not in services:
            continue
        versions: list[int] = []
        for path in sorted(service_dir.glob("*.sql")):
            match = _FILE.match(path.name)
            if not match:
                raise MigrationError(f"{path}: name must be NNNN_name.sql")
            version = int(match.group(1))
            versions.append(version)
            found.append(Migration(service_dir.name, version, match.group(2), path.read_text()))
        if versions != list(range(1, len(versions) + 1)):
            raise MigrationError(f"{service_dir}: versions must run 0001, 0002, ... without gaps")
    if services is not None:
        missing = set(services) - {m.service for m in found}
        if missing:
            raise MigrationError(f"no migrations for {', '.join(sorted(missing))} under {root}")
    elif not found:
        raise MigrationError(f"no migrations under {root}")
    return found


async def migrate(
    dsn: str, migrations: list[Migration], *, statement_timeout_ms: int | None = None
) -> list[Migration]:
    """Apply what is not applied yet; returns the migrations applied now.

    ``statement_timeout_ms``: the session's statement timeout (0: none; None: the
    server's default), ``MOWDECK_DATABASE_MAINTENANCE_STATEMENT_TIMEOUT_MS`` for
    ``mowdeck migrate``: a migration may rewrite a big table, but never hangs for ever.
    """
    conn = await _connect(dsn)
    applied_now: list[Migration] = []
    try:
        if statement_timeout_ms is not None:
            await set_statement_timeout(conn, statement_timeout_ms)
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        try:
            await conn.execute(_TABLE)
            rows = await conn.fetch(
                "SELECT service, version, name, checksum FROM mowdeck_migrations"
            )
            done = {(r["service"], r["version"]): r for r in rows}
            for migration in migrations:
                row = done.get((migration.service, migration.version))
                if row is not None:
                    if row["checksum"] != migration.checksum:
                        raise MigrationError(
                            f"{migration.service}/{migration.version:04d}_{migration.name}.sql "
                            "changed after it was applied; add a new migration instead"
                        )
                    continue
                try:
                    async with conn.transaction():
                        await conn.execute(migration.sql)
                        await conn.execute(
                            "INSERT INTO mowdeck_migrations (service, version, name, checksum)"
                            " VALUES ($1, $2, $3, $4)",
                            migration.service,
                            migration.version,
                            migration.name,
                            migration.checksum,
                        )
                except asyncpg.PostgresError as err:
                    raise MigrationError(
                        f"{migration.service}/{migration.version:04d}_{migration.name}.sql "
                        f"failed: {err}"
                    ) from err
                applied_now.append(migration)
                log.info(
                    "migration applied",
                    service=migration.service,
                    version=migration.version,
                    name=migration.name,
                )
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    finally:
        await conn.close()
    return applied_now


async def _connect(dsn: str) -> asyncpg.Connection:
    """Connect, or a ``MigrationError`` naming the server (never the password)."""
    try:
        return await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as err:
        raise MigrationError(f"cannot connect to {redact_dsn(dsn)}: {err}") from err


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password masked, for messages."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)
