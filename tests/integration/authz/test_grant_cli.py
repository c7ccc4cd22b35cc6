"""``mowdeck grant`` writes through the local adapter into PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from mowdeck.authz import LocalAuthorizer, PostgresTupleStore, mower_object, user_ref
from mowdeck.cli import main
from mowdeck.kit.migrate import discover, migrate, sql_root
from tests.support.jetstream import fresh_streams
from tests.support.natsserver import NatsServer

ACCOUNT = uuid.UUID("0000000a-0000-4000-8000-00000000000a")
OTHER = uuid.UUID("0000000b-0000-4000-8000-00000000000b")
MOWER = uuid.UUID("a1000000-0000-4000-8000-000000000001")


@pytest.fixture(scope="module")
def migrated(database_url: str) -> str:
    """The module's database with the authz migrations and one mower of ACCOUNT in north."""

    async def prepare() -> None:
        await migrate(database_url, discover(sql_root(), ["authz"]))
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                "INSERT INTO authz_tuples (object_type, object_id, relation, subject)"
                " VALUES ('mower', $1, 'account', $2), ('mower', $1, 'group', 'group:north')",
                str(MOWER),
                f"account:{ACCOUNT}",
            )
        finally:
            await conn.close()

    asyncio.run(prepare())
    return database_url


async def _can(url: str, user: str, relation: str) -> bool:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        return await LocalAuthorizer(PostgresTupleStore(pool)).check(
            user_ref(user), relation, mower_object(MOWER)
        )
    finally:
        await pool.close()


@pytest.fixture(autouse=True)
def _bus_for_grants(nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # A grant is announced on the bus (identity.grants.changed) after it is written.
    asyncio.run(fresh_streams(nats_server.url))
    monkeypatch.setenv("MOWDECK_NATS_URL", nats_server.url)


def grant(*args: str) -> int:
    return main(["grant", "--account", str(ACCOUNT), *args])


def test_grant_and_revoke(migrated: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOWDECK_DATABASE_URL", migrated)
    monkeypatch.delenv("MOWDECK_AUTHZ", raising=False)
    assert not asyncio.run(_can(migrated, "gus", "can_operate"))
    assert grant("--user", "gus", "--role", "operator", "--group", "north") == 0
    assert asyncio.run(_can(migrated, "gus", "can_operate"))
    assert grant("--user", "gus", "--role", "operator", "--group", "north", "--revoke") == 0
    assert not asyncio.run(_can(migrated, "gus", "can_view"))
    assert grant("--user", "vera", "--role", "viewer") == 0
    assert asyncio.run(_can(migrated, "vera", "can_view"))
    assert not asyncio.run(_can(migrated, "vera", "can_operate"))


def test_group_of_another_account_is_refused(
    migrated: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_DATABASE_URL", migrated)
    assert grant("--user", "gina", "--role", "viewer", "--group", "north") == 0
    code = main(
        ["grant", "--account", str(OTHER), "--user", "bob", "--role", "viewer", "--group", "north"]
    )
    assert code == 2
    assert "belongs to" in capsys.readouterr().err


def test_unmigrated_database_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.postgres import create_database, drop_database  # noqa: PLC0415

    empty = create_database()
    try:
        monkeypatch.setenv("MOWDECK_DATABASE_URL", empty)
        assert grant("--user", "x", "--role", "admin") == 2
        assert "authz_tuples" in capsys.readouterr().err
    finally:
        drop_database(empty)


@pytest.mark.parametrize(
    "url",
    ["postgres-nonsense://x", "postgresql://postgres:secret@127.0.0.1:5432:99/x"],
    ids=["scheme", "port"],
)
def test_a_bad_database_url_is_reported(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_DATABASE_URL", url)
    monkeypatch.delenv("MOWDECK_AUTHZ", raising=False)
    assert grant("--user", "x", "--role", "admin") == 2
    err = capsys.readouterr().err
    assert err.startswith("mowdeck grant: cannot reach ")
    assert "Traceback" not in err
    assert "secret" not in err


SITE = uuid.UUID("5a000000-0000-4000-8000-00000000005a")
SITE_MOWER = uuid.UUID("a4000000-0000-4000-8000-000000000004")


async def _site_with_mower(url: str) -> None:
    # What Fleet writes when it creates the site and places the mower there.
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO authz_tuples (object_type, object_id, relation, subject) VALUES"
            " ('site', $1, 'account', $3), ('mower', $2, 'account', $3),"
            " ('mower', $2, 'site', 'site:' || $1) ON CONFLICT DO NOTHING",
            str(SITE),
            str(SITE_MOWER),
            f"account:{ACCOUNT}",
        )
    finally:
        await conn.close()


async def _can_on(url: str, user: str, relation: str, mower: uuid.UUID) -> bool:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        return await LocalAuthorizer(PostgresTupleStore(pool)).check(
            user_ref(user), relation, mower_object(mower)
        )
    finally:
        await pool.close()


def test_site_grant_reaches_exactly_the_sites_mowers(
    migrated: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_DATABASE_URL", migrated)
    monkeypatch.delenv("MOWDECK_AUTHZ", raising=False)
    asyncio.run(_site_with_mower(migrated))
    assert grant("--user", "sam", "--role", "viewer", "--site", str(SITE)) == 0
    assert f"on site:{SITE}" in capsys.readouterr().out
    assert asyncio.run(_can_on(migrated, "sam", "can_view", SITE_MOWER))
    assert not asyncio.run(_can_on(migrated, "sam", "can_operate", SITE_MOWER))
    assert not asyncio.run(_can_on(migrated, "sam", "can_view", MOWER))
    assert grant("--user", "sam", "--role", "viewer", "--site", str(SITE), "--revoke") == 0
    assert not asyncio.run(_can_on(migrated, "sam", "can_view", SITE_MOWER))


def test_site_grant_refuses_admin_and_foreign_sites(
    migrated: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_DATABASE_URL", migrated)
    asyncio.run(_site_with_mower(migrated))
    assert grant("--user", "sam", "--role", "admin", "--site", str(SITE)) == 2
    assert "a site role must be one of" in capsys.readouterr().err
    code = main(
        ["grant", "--account", str(OTHER), "--user", "bob", "--role", "viewer", "--site", str(SITE)]
    )
    assert code == 2
    assert "is not a site of account" in capsys.readouterr().err
    assert grant("--user", "sam", "--role", "viewer", "--site", str(uuid.uuid4())) == 2
