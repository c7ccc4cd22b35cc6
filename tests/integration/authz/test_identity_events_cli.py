"""``mowdeck grant`` and ``mowdeck user`` announce what changed as ``identity.*`` events."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from contracts.v1 import GrantsChanged, UserRef, decode_event
from contracts.v1.subjects import EVENTS
from mowdeck.cli import main
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from tests.support.jetstream import fresh_streams
from tests.support.natsserver import NatsServer, free_port

ACCOUNT = uuid.UUID("0000000c-0000-4000-8000-00000000000c")


@pytest.fixture(scope="module")
def migrated(database_url: str) -> str:
    asyncio.run(migrate(database_url, discover(sql_root(), ["authz"])))
    return database_url


async def _stored_events(url: str) -> list[tuple[str, object]]:
    """Every event on the EVENTS stream, in order (type, payload)."""
    bus = await Bus.connect(url, name="test-identity-read")
    try:
        info = await bus.js.stream_info(EVENTS.name)
        events = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await bus.js.get_msg(EVENTS.name, seq)
            event = decode_event(msg.data or b"")
            events.append((event.type, event.payload))
        return events
    finally:
        await bus.drain()


@pytest.fixture
def env(migrated: str, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch) -> str:
    asyncio.run(fresh_streams(nats_server.url))
    monkeypatch.setenv("MOWDECK_DATABASE_URL", migrated)
    monkeypatch.setenv("MOWDECK_NATS_URL", nats_server.url)
    monkeypatch.delenv("MOWDECK_AUTHZ", raising=False)
    return nats_server.url


def test_grant_and_revoke_publish_grants_changed(env: str) -> None:
    assert main(["grant", "--account", str(ACCOUNT), "--user", "ann", "--role", "viewer"]) == 0
    assert (
        main(["grant", "--account", str(ACCOUNT), "--user", "ann", "--role", "viewer", "--revoke"])
        == 0
    )
    changed = GrantsChanged(account_id=ACCOUNT, user_id="ann", object=f"account:{ACCOUNT}")
    assert asyncio.run(_stored_events(env)) == [
        ("identity.grants.changed", changed),
        ("identity.grants.changed", changed),
    ]


@pytest.mark.parametrize(
    ("action", "event_type"),
    [("disable", "identity.user.disabled"), ("delete", "identity.user.deleted")],
    ids=["disable", "delete"],
)
def test_user_command_publishes_its_event(env: str, action: str, event_type: str) -> None:
    assert main(["user", action, "--user", "bob", "--account", str(ACCOUNT)]) == 0
    assert asyncio.run(_stored_events(env)) == [
        (event_type, UserRef(user_id="bob", account_id=ACCOUNT))
    ]


def test_grant_without_a_bus_holds_and_says_the_event_is_missing(
    migrated: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_DATABASE_URL", migrated)
    monkeypatch.setenv("MOWDECK_NATS_URL", f"nats://127.0.0.1:{free_port()}")
    monkeypatch.delenv("MOWDECK_AUTHZ", raising=False)
    assert main(["grant", "--account", str(ACCOUNT), "--user", "cy", "--role", "admin"]) == 3
    err = capsys.readouterr().err
    assert "the grant holds" in err
    assert "cannot reach NATS" in err

    async def can_view() -> bool:
        pool = await asyncpg.create_pool(migrated, min_size=1, max_size=1)
        try:
            rows = await pool.fetch("SELECT subject FROM authz_tuples WHERE subject = 'user:cy'")
            return bool(rows)
        finally:
            await pool.close()

    assert asyncio.run(can_view())
