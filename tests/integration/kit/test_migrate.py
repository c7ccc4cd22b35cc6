"""The migration runner against a real PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from mowdeck.cli import main
from mowdeck.kit.migrate import MigrationError, discover, migrate


def _write(root: Path, service: str, name: str, sql: str) -> None:
    (root / service).mkdir(parents=True, exist_ok=True)
    (root / service / name).write_text(sql)


async def test_applies_once_in_order_and_records_checksums(
    tmp_path: Path, database_url: str
) -> None:
    _write(tmp_path, "alpha", "0001_init.sql", "CREATE TABLE a (id int primary key);")
    _write(tmp_path, "alpha", "0002_more.sql", "ALTER TABLE a ADD COLUMN note text;")
    _write(tmp_path, "beta", "0001_init.sql", "CREATE TABLE b (id int);")
    first = await migrate(database_url, discover(tmp_path))
    second = await migrate(database_url, discover(tmp_path))
    assert [(m.service, m.version) for m in first] == [("alpha", 1), ("alpha", 2), ("beta", 1)]
    assert second == []
    conn = await asyncpg.connect(database_url)
    try:
        cols = await conn.fetch(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'a' ORDER BY column_name"
        )
        assert [c[0] for c in cols] == ["id", "note"]
        count = await conn.fetchval("SELECT count(*) FROM mowdeck_migrations")
        assert count == 3
    finally:
        await conn.close()


async def test_a_changed_applied_file_is_an_error(tmp_path: Path, database_url: str) -> None:
    _write(tmp_path, "gamma", "0001_init.sql", "CREATE TABLE g (id int);")
    await migrate(database_url, discover(tmp_path, ["gamma"]))
    _write(tmp_path, "gamma", "0001_init.sql", "CREATE TABLE g (id bigint);")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await migrate(database_url, discover(tmp_path, ["gamma"]))


async def test_a_failing_migration_rolls_back_alone(tmp_path: Path, database_url: str) -> None:
    _write(tmp_path, "delta", "0001_init.sql", "CREATE TABLE d (id int);")
    _write(tmp_path, "delta", "0002_bad.sql", "CREATE TABLE d2 (id int); SELECT nope;")
    with pytest.raises(MigrationError, match=r"0002_bad\.sql failed"):
        await migrate(database_url, discover(tmp_path, ["delta"]))
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT to_regclass('d') IS NOT NULL")
        assert await conn.fetchval("SELECT to_regclass('d2') IS NULL")
    finally:
        await conn.close()


async def test_replicas_migrating_together_do_not_collide(
    tmp_path: Path, database_url: str
) -> None:
    _write(tmp_path, "eps", "0001_init.sql", "CREATE TABLE e (id int); SELECT pg_sleep(0.2);")
    results = await asyncio.gather(
        *(migrate(database_url, discover(tmp_path, ["eps"])) for _ in range(3))
    )
    assert sorted(len(r) for r in results) == [0, 0, 1]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"0001_a.sql": "", "0003_c.sql": ""}, "without gaps"),
        ({"1_a.sql": ""}, "NNNN_name.sql"),
    ],
    ids=["gap", "bad-name"],
)
def test_discover_refuses_bad_layouts(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, sql in files.items():
        _write(tmp_path, "zeta", name, sql)
    with pytest.raises(MigrationError, match=message):
        discover(tmp_path)


def test_a_missing_root_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="is not a folder"):
        discover(tmp_path / "nowhere")


def test_a_root_without_migrations_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="no migrations under"):
        discover(tmp_path)


def test_a_service_without_a_folder_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "eta", "0001_init.sql", "")
    with pytest.raises(MigrationError, match="no migrations for ghost"):
        discover(tmp_path, ["eta", "ghost"])


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        ("postgresql://postgres:secret@127.0.0.1:1/x", "Connect call failed"),
        ("postgres-nonsense://x", "invalid DSN"),
    ],
    ids=["unreachable", "bad-url"],
)
async def test_a_server_that_cannot_be_reached_is_a_migration_error(dsn: str, message: str) -> None:
    with pytest.raises(MigrationError, match="cannot connect to") as caught:
        await migrate(dsn, [])
    assert message in str(caught.value)
    assert "secret" not in str(caught.value)


async def test_a_missing_database_is_a_migration_error(database_url: str) -> None:
    missing = database_url.rsplit("/", 1)[0] + "/mowdeck_no_such_database"
    with pytest.raises(MigrationError, match='database "mowdeck_no_such_database" does not'):
        await migrate(missing, [])


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MOWDECK_SQL_DIR": "/nonexistent/sql"}, "/nonexistent/sql is not a folder"),
        ({"MOWDECK_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"}, "cannot connect to"),
        ({"MOWDECK_DATABASE_URL": "not a url"}, "cannot connect to not a url"),
    ],
    ids=["no-sql-folder", "unreachable", "bad-url"],
)
def test_the_command_reports_in_one_line(
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["migrate"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("mowdeck migrate: ")
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert "applied" not in captured.out


async def test_a_migration_runs_under_the_statement_timeout_it_is_given(
    tmp_path: Path, database_url: str
) -> None:
    _write(tmp_path, "epsilon", "0001_slow.sql", "SELECT pg_sleep(0.5);")
    with pytest.raises(MigrationError, match="statement timeout"):
        await migrate(database_url, discover(tmp_path, ["epsilon"]), statement_timeout_ms=100)
    applied = await migrate(database_url, discover(tmp_path, ["epsilon"]), statement_timeout_ms=0)
    assert [m.name for m in applied] == ["slow"]
