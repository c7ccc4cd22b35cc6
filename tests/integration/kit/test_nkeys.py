"""NKey users from ``mowdeck nats-config --auth nkey``, on a real ``nats-server``.

A service connects with nothing but its seed file (``MOWDECK_NATS_NKEY_SEED_FILE`` from its
env file) and gets its own permissions: it does its work and is refused the rest; a
seed the server does not know, and no credentials at all, are refused at connect.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import structlog

from mowdeck.commands.nats_config import new_seed, write_config
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.publisher import Publisher
from mowdeck.kit.settings import BaseSettings, load_settings
from tests.support.natscluster import NatsCluster, refused_at_connect

pytestmark = pytest.mark.timeout(60)


def _env(folder: Path, user: str) -> dict[str, str]:
    lines = (folder / f"{user}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


@pytest.fixture(scope="module")
def node() -> Iterator[NatsCluster]:
    server = NatsCluster(1, extra_config='include "auth.conf"')
    args = argparse.Namespace(
        dir=server.root,
        nodes=1,
        host="nats-{i}",
        client_port=4222,
        cluster_port=6222,
        store_dir="/data",
        rotate=[],
        auth="nkey",
        secrets_path=None,
    )
    write_config(args)
    server.start()
    yield server
    server.close()


async def _as(node: NatsCluster, user: str) -> Bus:
    environ = {"MOWDECK_NATS_URL": node.url, **_env(node.root, user)}
    settings = load_settings(BaseSettings, environ)
    return await asyncio.wait_for(
        Bus.connect(
            settings.nats_url,
            name=user,
            credentials=NatsCredentials.from_settings(settings),
            user=user,
        ),
        10,
    )


@pytest.fixture
async def admin(node: NatsCluster) -> AsyncIterator[Bus]:
    bus = await _as(node, "admin")
    await apply_all(bus)
    yield bus
    await bus.drain()


def test_the_env_files_name_only_a_seed_file_and_the_server_only_public_keys(
    node: NatsCluster,
) -> None:
    env = _env(node.root, "telemetry")
    assert env == {"MOWDECK_NATS_NKEY_SEED_FILE": str(node.root.resolve() / "telemetry.nk")}
    seed = (node.root / "telemetry.nk").read_text().strip()
    assert seed.startswith("SU")
    auth = (node.root / "auth.conf").read_text()
    assert seed not in auth
    assert auth.count('nkey: "U') == 7
    assert "password" not in auth


async def test_a_service_connects_with_its_seed_and_is_refused_what_is_not_its_own(
    node: NatsCluster, admin: Bus
) -> None:
    gateway = await _as(node, "gateway")
    telemetry = await _as(node, "telemetry")
    try:
        state = f"telemetry.mower.{uuid.uuid4()}"
        ack = await gateway.publish(state, b"s", msg_id=uuid.uuid4().hex)
        assert (ack.stream, gateway.refused) == ("TELEMETRY", 0)
        sub = await telemetry.js.pull_subscribe(
            "telemetry.mower.*", durable="nkey-states", stream="TELEMETRY"
        )
        [msg] = await sub.fetch(1, timeout=5)
        assert msg.data == b"s"
        await msg.ack()

        telemetry._publisher = Publisher(telemetry.nc, deadline=0.5)
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(Exception, match=r"ack|timed out|Timeout"):
                await telemetry.publish(f"command.mower.{uuid.uuid4()}", b"c", msg_id="x")
            await telemetry.nc.flush()
        assert telemetry.refused == 1
        assert any(e["event"] == "nats permission refused" for e in logs)
    finally:
        await gateway.drain()
        await telemetry.drain()


async def test_an_unknown_seed_and_no_credentials_are_refused(
    node: NatsCluster, tmp_path: Path
) -> None:
    stranger = tmp_path / "stranger.nk"
    stranger.write_text(new_seed() + "\n")
    for options in ({"nkeys_seed": str(stranger)}, {}):
        assert "authorization violation" in (await refused_at_connect(node.url, **options))
