"""Each service's NATS user, from ``mowdeck nats-config``, on a real server.

A refused publish or subscription comes back as an asynchronous ``-ERR`` naming the
subject, which may arrive after the ``PONG`` of the flush that follows: a refusal is
waited for (up to 2 s) by its subject; what is allowed is shown by the work done (an
ack, a delivery, a reply) and by no error at all by then.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import structlog
from nats.aio.client import Client

from contracts.v1.subjects import STREAMS
from mowdeck.commands.nats_config import write_config
from mowdeck.kit.bus import Bus, BusError, NatsCredentials
from mowdeck.kit.bus_permissions import ADMIN, USERS, inbox_prefix
from mowdeck.kit.publisher import Publisher
from tests.support.jetstream import recreate_streams
from tests.support.natscluster import NatsCluster

MOWER = uuid.uuid4()
COMMAND = f"command.mower.{MOWER}"
RESULT = f"command.result.mower.{MOWER}"
STATE = f"telemetry.mower.{MOWER}"
NAMES = [u.name for u in USERS] + [ADMIN.name]


def _passwords(folder: Path) -> dict[str, str]:
    out = {}
    for name in NAMES:
        env = dict(line.split("=", 1) for line in (folder / f"{name}.env").read_text().splitlines())
        assert env["MOWDECK_NATS_USER"] == name
        out[name] = env["MOWDECK_NATS_PASSWORD"]
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[NatsCluster, dict[str, str]]]:
    # An include is read relative to the including file: the users go beside the node's.
    node = NatsCluster(1, extra_config='include "auth.conf"')
    args = argparse.Namespace(
        dir=node.root,
        nodes=1,
        host="nats-{i}",
        client_port=4222,
        cluster_port=6222,
        store_dir="/data",
        rotate=[],
    )
    write_config(args)
    node.start()
    yield node, _passwords(node.root)
    node.close()


class Conn:
    """A raw nats-py client of one user that records the server's refusals."""

    def __init__(self, nc: Client, errors: list[str]) -> None:
        self.nc = nc
        self.errors = errors
        self.js = nc.jetstream(timeout=5)

    async def _refused(self, what: str) -> bool:
        await self.nc.flush()
        needle = f'{what}"'.lower()
        for _ in range(100):
            if any(needle in e.lower() for e in self.errors):
                return True
            await asyncio.sleep(0.02)
        return False

    async def refused_publish(self, subject: str) -> bool:
        self.errors.clear()
        await self.nc.publish(subject, b"x")
        return await self._refused(f'publish to "{subject}')

    async def refused_subscribe(self, subject: str) -> bool:
        self.errors.clear()
        sub = await self.nc.subscribe(subject)
        refused = await self._refused(f'subscription to "{subject}')
        await sub.unsubscribe()
        return refused


@pytest.fixture
async def connect(
    server: tuple[NatsCluster, dict[str, str]],
) -> AsyncIterator[object]:
    node, passwords = server
    opened: list[Client] = []

    async def _connect(name: str) -> Conn:
        errors: list[str] = []

        async def on_error(err: Exception) -> None:
            errors.append(str(err))

        nc = await nats.connect(
            node.url,
            user=name,
            password=passwords[name],
            error_cb=on_error,
            connect_timeout=2,
            inbox_prefix=inbox_prefix(name),  # as Bus.connect(user=name) sets it
        )
        opened.append(nc)
        return Conn(nc, errors)

    try:
        admin = await _connect("admin")
        await recreate_streams(
            Bus(admin.nc, name="admin"), apply=lambda bus: bus.ensure_streams(STREAMS)
        )
        yield _connect
    finally:
        for nc in opened:
            await nc.close()


async def test_fleet_commands_announces_and_answers_the_mower_list(connect) -> None:  # type: ignore[no-untyped-def]
    fleet, gateway = await connect("fleet"), await connect("gateway")
    assert (await fleet.js.publish(COMMAND, b"c", stream="COMMANDS")).seq == 1
    assert not await fleet.refused_publish(f"emergency.mower.{MOWER}")  # a stop's announcement
    assert (await fleet.js.publish("event.mower.registered", b"e")).stream == "EVENTS"

    assert not await fleet.refused_subscribe("fleet.mowers.list")
    assert not await gateway.refused_publish("fleet.mowers.list")
    # Fleet records results: its durable on COMMANDS binds and reads.
    sub = await fleet.js.pull_subscribe(
        "command.result.mower.*", durable="fleet-command-results", stream="COMMANDS"
    )
    assert fleet.errors == []
    await sub.unsubscribe()
    assert await fleet.refused_publish(RESULT)
    assert await fleet.refused_publish(STATE)
    assert await fleet.refused_publish("event.notifications.sent")


async def test_the_gateway_executes_but_cannot_command(connect) -> None:  # type: ignore[no-untyped-def]
    fleet, gateway = await connect("fleet"), await connect("gateway")
    assert not await gateway.refused_subscribe("emergency.mower.*")  # the emergency lane
    await fleet.js.publish(COMMAND, b"c")
    sub = await gateway.js.pull_subscribe(
        "command.mower.*", durable="device-gateway-0", stream="COMMANDS"
    )
    [msg] = await sub.fetch(1, timeout=2)
    await msg.ack()
    assert (await gateway.js.publish(RESULT, b"r")).stream == "COMMANDS"
    assert (await gateway.js.publish(STATE, b"s")).stream == "TELEMETRY"
    assert (await gateway.js.publish("event.mower.connected", b"l")).stream == "EVENTS"
    assert gateway.errors == []
    assert await gateway.refused_publish(COMMAND)
    assert await gateway.refused_publish(f"emergency.mower.{MOWER}")
    # Commands reach the gateway through its durable's inbox, not a core subscription.
    assert await gateway.refused_subscribe("command.mower.*")
    assert await gateway.refused_publish("event.mower.registered")
    assert await gateway.refused_subscribe("fleet.mowers.list")
    assert await gateway.refused_publish("$JS.API.STREAM.DELETE.COMMANDS")


@pytest.mark.parametrize("name", ["telemetry", "notifications", "realtime", "cli", "admin"])
async def test_only_fleet_commands_only_the_gateway_results_only_fleet_lists(
    connect,
    name: str,  # type: ignore[no-untyped-def]
) -> None:
    conn = await connect(name)
    assert await conn.refused_publish(COMMAND)
    assert await conn.refused_publish(RESULT)
    assert await conn.refused_publish(STATE)
    assert await conn.refused_subscribe("fleet.mowers.list")
    assert await conn.refused_subscribe("command.mower.*")
    assert await conn.refused_publish(f"emergency.mower.{MOWER}")
    assert await conn.refused_subscribe("emergency.mower.*")


async def test_telemetry_and_realtime_consume_and_publish_nothing(connect) -> None:  # type: ignore[no-untyped-def]
    gateway = await connect("gateway")
    await gateway.js.publish(STATE, b"s")
    for name in ("telemetry", "realtime"):
        conn = await connect(name)
        sub = await conn.js.pull_subscribe(
            "telemetry.mower.*", durable=f"{name}-states", stream="TELEMETRY"
        )
        [msg] = await sub.fetch(1, timeout=2)
        await msg.ack()
        assert conn.errors == []
        assert await conn.refused_publish("event.mower.registered")
        assert await conn.refused_publish("event.notifications.sent")
        assert await conn.refused_publish("$JS.API.STREAM.UPDATE.TELEMETRY")
    realtime = await connect("realtime")
    last = await realtime.js.get_last_msg("TELEMETRY", STATE)
    assert last.data == b"s"


async def test_notifications_and_the_cli_publish_their_own_events(connect) -> None:  # type: ignore[no-untyped-def]
    notifications, cli = await connect("notifications"), await connect("cli")
    assert (await notifications.js.publish("event.notifications.sent", b"n")).stream == "EVENTS"
    assert (await cli.js.publish("event.identity.grants.changed", b"g")).stream == "EVENTS"
    assert notifications.errors == cli.errors == []
    assert await notifications.refused_publish("event.identity.user.deleted")
    assert await cli.refused_publish("event.notifications.sent")
    assert await cli.refused_publish("event.mower.removed")


async def test_only_the_admin_changes_streams(connect) -> None:  # type: ignore[no-untyped-def]
    fleet, admin = await connect("fleet"), await connect("admin")
    assert await fleet.refused_publish("$JS.API.STREAM.CREATE.X")
    info = await admin.js.stream_info("COMMANDS")
    assert info.config.name == "COMMANDS"


async def test_a_refused_publish_is_an_error_logged_and_counted_not_a_hang(
    server: tuple[NatsCluster, dict[str, str]],
    connect,  # type: ignore[no-untyped-def]
) -> None:
    node, passwords = server
    bus = await Bus.connect(
        node.url,
        name="telemetry",
        credentials=NatsCredentials(user="telemetry", password=passwords["telemetry"]),
        user="telemetry",
    )
    bus._publisher = Publisher(bus.nc, deadline=0.5)
    try:
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(Exception, match=r"ack|timed out|Timeout"):
                await bus.publish(COMMAND, b"c", msg_id="x")
            await bus.nc.flush()
        assert bus.refused == 1
        assert any(e["event"] == "nats permission refused" for e in logs)
    finally:
        await bus.drain()


@pytest.mark.parametrize("name", NAMES)
async def test_each_user_reads_replies_on_its_own_inbox_prefix_only(connect, name: str) -> None:  # type: ignore[no-untyped-def]
    conn = await connect(name)
    assert not await conn.refused_subscribe(f"{inbox_prefix(name)}.>")
    assert await conn.refused_subscribe("_INBOX.>")  # nats-py's default prefix: everyone's
    assert await conn.refused_subscribe(">")
    for other in NAMES:
        if other != name:
            assert await conn.refused_subscribe(f"{inbox_prefix(other)}.>"), other
            assert await conn.refused_subscribe(f"{inbox_prefix(other)}.abc"), other


async def test_fleet_answers_the_mower_list_to_the_services_that_ask(
    connect,  # type: ignore[no-untyped-def]
) -> None:
    fleet = await connect("fleet")
    asked: list[str] = []

    async def answer(msg: nats.aio.msg.Msg) -> None:
        asked.append(msg.reply)
        await msg.respond(b"mowers of " + msg.data)

    await fleet.nc.subscribe("fleet.mowers.list", queue="fleet", cb=answer)
    await fleet.nc.flush()  # the server has the subscription before anyone asks
    await fleet.nc.flush()
    askers = ("gateway", "telemetry", "notifications", "realtime")
    for name in askers:
        conn = await connect(name)
        reply = await conn.nc.request("fleet.mowers.list", name.encode(), timeout=2)
        assert reply.data == f"mowers of {name}".encode()
        assert asked[-1].startswith(f"{inbox_prefix(name)}.")  # the asker's own inbox
        assert conn.errors == []
    assert len(asked) == len(askers)
    assert fleet.errors == []


async def test_a_reply_sent_to_another_users_inbox_is_not_read_by_a_third(
    connect,  # type: ignore[no-untyped-def]
) -> None:
    # Telemetry cannot listen in on the gateway's replies: its subscription is refused,
    # and the gateway still gets its answer.
    fleet, gateway, telemetry = (
        await connect("fleet"),
        await connect("gateway"),
        await connect("telemetry"),
    )

    async def answer(msg: nats.aio.msg.Msg) -> None:
        await msg.respond(b"list")

    await fleet.nc.subscribe("fleet.mowers.list", cb=answer)
    await fleet.nc.flush()  # the server has the subscription before anyone asks
    assert await telemetry.refused_subscribe(f"{inbox_prefix('gateway')}.>")
    reply = await gateway.nc.request("fleet.mowers.list", b"", timeout=2)
    assert reply.data == b"list"


async def test_a_stream_a_user_may_not_look_at_is_an_error_naming_the_right(
    server: tuple[NatsCluster, dict[str, str]],
    connect,  # type: ignore[no-untyped-def]
) -> None:
    node, passwords = server
    bus = await Bus.connect(
        node.url,
        name="cli",
        credentials=NatsCredentials(user="cli", password=passwords["cli"]),
        user="cli",
    )
    bus.js = bus.nc.jetstream(timeout=1.0)
    try:
        assert await bus.missing_streams(["EVENTS"]) == []  # its own: looked at, found
        with pytest.raises(BusError, match=r"\$JS\.API\.STREAM\.INFO\.TELEMETRY"):
            await bus.require_streams(["TELEMETRY"])
    finally:
        await bus.drain()


async def test_notifications_follows_the_site_events_and_asks_for_the_sites_areas(
    connect,  # type: ignore[no-untyped-def]
) -> None:
    # What the geofences' feed does on every replica (mowdeck/kit/sites.py): an ordered
    # consumer of its own on event.site.*, and the core request fleet.sites.areas.
    fleet, notifications = await connect("fleet"), await connect("notifications")
    seen: list[str] = []

    async def on_event(msg: nats.aio.msg.Msg) -> None:
        seen.append(msg.subject)

    async def answer(msg: nats.aio.msg.Msg) -> None:
        await msg.respond(b"areas")

    sub = await notifications.js.subscribe(
        "event.site.*", stream="EVENTS", ordered_consumer=True, cb=on_event
    )
    await fleet.nc.subscribe("fleet.sites.areas", cb=answer)
    await fleet.nc.flush()
    await fleet.js.publish("event.site.areas_changed", b"{}")
    reply = await notifications.nc.request("fleet.sites.areas", b"{}", timeout=2)
    assert reply.data == b"areas"
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.02)
    assert seen == ["event.site.areas_changed"]
    await sub.unsubscribe()
    assert notifications.errors == fleet.errors == []
