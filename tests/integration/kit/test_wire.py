"""The lean client against a real JetStream: deliveries with headers, acks written in bulk.

Every test here runs on the fast client, whatever ``MOWDECK_NATS_FAST_PATH`` says.
"""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import ConnectionDrainingError, MsgAlreadyAckdError, NotJSMessageError

from mowdeck.kit import _fastclient, wire
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from tests.support.jetstream import unsettled
from tests.support.natsserver import NatsServer

SUBJECT = "telemetry.mower.00000000-0000-4000-8000-000000000042"


@pytest.fixture
def nats_fast_path() -> bool:
    """The ``bus`` fixture on the fast client."""
    return True


async def _receive(bus: Bus, durable: str, count: int) -> tuple[Consumer, list[Msg]]:
    got: list[Msg] = []
    arrived = asyncio.Event()

    async def keep(msg: Msg) -> None:
        got.append(msg)
        if len(got) == count:
            arrived.set()

    consumer = Consumer(
        bus, ConsumerSpec(stream="TELEMETRY", subject="telemetry.>", durable=durable), keep
    )
    await consumer.start()
    await asyncio.wait_for(arrived.wait(), 5)
    return consumer, got


async def _unacked(bus: Bus, durable: str, expect: int | None = None) -> int:
    until = None if expect is None else (0, expect)  # every message delivered by then
    return (await unsettled(bus, "TELEMETRY", durable, until=until))[1]


async def test_the_bus_uses_the_lean_client(bus: Bus) -> None:
    assert isinstance(bus.nc, _fastclient.Client)
    assert isinstance(bus.nc._ps, _fastclient.FastParser)
    assert wire.is_fast(bus.nc)


async def test_deliveries_keep_payload_headers_and_metadata(bus: Bus) -> None:
    payloads = [b"", b"x", bytes(range(256)) * 40]
    for n, payload in enumerate(payloads):
        await bus.publish(SUBJECT, payload, msg_id=f"m-{n}", headers={"X-Seq": f" {n} "})
    consumer, got = await _receive(bus, "wire-read", len(payloads))
    try:
        assert [m.data for m in got] == payloads
        assert [m.headers for m in got] == [
            {"Nats-Msg-Id": f"m-{n}", "X-Seq": str(n)} for n in range(len(payloads))
        ]
        assert {m.subject for m in got} == {SUBJECT}
        assert [m.metadata.sequence.stream for m in got] == [1, 2, 3]
        await wire.ack_all(got)
    finally:
        await consumer.stop()


async def test_ack_all_settles_every_delivery(bus: Bus) -> None:
    for n in range(50):
        await bus.publish(SUBJECT, b"{}", msg_id=f"a-{n}")
    consumer, got = await _receive(bus, "wire-ack", 50)
    try:
        assert await _unacked(bus, "wire-ack") == 50
        await wire.ack_all(got[:20])
        await wire.ack_all([])
        await bus.nc.flush()
        assert await _unacked(bus, "wire-ack", 30) == 30
        assert all(m._ackd for m in got[:20])
        # Already settled: refused before anything is sent, like msg.ack().
        with pytest.raises(MsgAlreadyAckdError):
            await wire.ack_all([got[20], got[0]])
        # Sentinel: an ack written behind the refused call on the same connection. The
        # consumer takes acks in in order: once it counted this one, an ack sent by
        # mistake would have been counted too.
        await got[49].ack()
        await bus.nc.flush()
        assert await _unacked(bus, "wire-ack", 29) == 29
        assert not got[20]._ackd
        with pytest.raises(MsgAlreadyAckdError):
            await wire.ack_all([got[20], got[20]])  # the same delivery twice
        assert not got[20]._ackd
        await wire.ack_all(got[20:49])
        await bus.nc.flush()
        assert await _unacked(bus, "wire-ack", 0) == 0
    finally:
        await consumer.stop()


async def test_progress_all_keeps_deliveries_from_being_redelivered(bus: Bus) -> None:
    for n in range(5):
        await bus.publish(SUBJECT, b"{}", msg_id=f"p-{n}")
    got: list[Msg] = []

    async def keep(msg: Msg) -> None:
        got.append(msg)

    # Reported in progress every 0.3 s for two ack waits of 1.2 s: a loaded machine may
    # stretch a 0.3 s sleep a good deal before the ack wait runs out.
    spec = ConsumerSpec(stream="TELEMETRY", subject="telemetry.>", durable="wire-wpi", ack_wait=1.2)
    consumer = Consumer(bus, spec, keep)
    await consumer.start()
    try:
        for _ in range(8):
            await asyncio.sleep(0.3)
            await wire.progress_all(got)
        assert len(got) == 5  # nothing was redelivered
        assert not any(m._ackd for m in got)  # in progress settles nothing
        await wire.ack_all(got)
        await wire.progress_all(got)  # settled ones are skipped
        await bus.nc.flush()
        assert await _unacked(bus, "wire-wpi", 0) == 0
    finally:
        await consumer.stop()


async def test_ack_all_refuses_a_core_message(bus: Bus) -> None:
    got: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()

    async def keep(msg: Msg) -> None:
        got.set_result(msg)

    sub = await bus.nc.subscribe("plain.subject", cb=keep)
    await bus.nc.publish("plain.subject", b"hi")
    msg = await asyncio.wait_for(got, 5)
    await sub.unsubscribe()
    with pytest.raises(NotJSMessageError):
        await wire.ack_all([msg])


class _Seen:
    """What a direct subscription's handler got."""

    def __init__(self, fail_on: bytes | None = None) -> None:
        self.got: list[tuple[bytes, bytes, bytes, bytes | None]] = []
        self.fail_on = fail_on
        self.changed = asyncio.Event()

    def __call__(self, subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        self.changed.set()
        if data == self.fail_on:
            raise RuntimeError("a handler's own bug")
        self.got.append((bytes(subject), bytes(reply), data, hdr))

    async def wait_for(self, count: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.got) < count:
                self.changed.clear()
                await self.changed.wait()


async def test_a_direct_subscription_gets_the_bytes_as_they_came(bus: Bus) -> None:
    nc = bus.nc
    assert isinstance(nc, _fastclient.Client)
    seen = _Seen()
    sub = await nc.subscribe_direct("direct.>", seen)
    received = nc.stats["in_msgs"]
    await nc.publish("direct.a", b"one", reply="back", headers={"Mowdeck-Priority": "emergency"})
    await nc.publish("direct.b", b"two")
    await seen.wait_for(2)
    (subject, reply, data, hdr), plain = seen.got
    assert (subject, reply, data) == (b"direct.a", b"back", b"one")
    assert hdr is not None and hdr.startswith(b"NATS/1.0\r\n")
    assert wire.parse_header_lines(hdr[len(b"NATS/1.0\r\n") :]) == {"Mowdeck-Priority": "emergency"}
    assert plain == (b"direct.b", b"", b"two", None)
    assert nc.stats["in_msgs"] == received + 2
    await sub.unsubscribe()
    assert not nc._direct
    # Published from elsewhere after the server took the UNSUB: nothing reaches the handler.
    await nc.flush()
    other = await _other(bus)
    try:
        await other.nc.publish("direct.c", b"three")
        await other.nc.flush()
    finally:
        await other.drain()
    await nc.flush()
    assert len(seen.got) == 2


async def test_a_failing_handler_costs_only_its_own_message(bus: Bus) -> None:
    nc = bus.nc
    assert isinstance(nc, _fastclient.Client)
    seen = _Seen(fail_on=b"bad")
    sub = await nc.subscribe_direct("direct.x", seen)
    for data in (b"first", b"bad", b"last"):
        await nc.publish("direct.x", data)
    await seen.wait_for(2)
    assert [g[2] for g in seen.got] == [b"first", b"last"]
    assert nc.is_connected
    await sub.unsubscribe()


async def test_draining_a_direct_subscription_hands_on_what_was_sent_before(bus: Bus) -> None:
    nc = bus.nc
    assert isinstance(nc, _fastclient.Client)
    seen = _Seen()
    sub = await nc.subscribe_direct("direct.d", seen)
    # From another connection, flushed: the server has routed all of them before the
    # drain's UNSUB (a connection's deliveries to itself and its PONG are not ordered).
    other = await _other(bus)
    try:
        for i in range(500):
            await other.nc.publish("direct.d", str(i).encode())
        await other.nc.flush()
    finally:
        await other.drain()
    await sub.drain()
    assert [int(g[2]) for g in seen.got] == list(range(500))
    assert not nc._direct


async def _other(bus: Bus) -> Bus:
    """A second connection to the same server."""
    url = bus.nc.connected_url
    assert url is not None
    return await Bus.connect(f"nats://{url.netloc}", name="publisher", fast_path=True)


async def test_a_direct_subscription_keeps_its_handler_while_nats_py_keeps_it(
    nats_server: NatsServer,
) -> None:
    # An unsubscribe refused while the connection drains leaves the subscription in
    # place; its messages must still go to the handler, not to a queue the drain waits
    # for. The connection's drain then ends it, handler and all.
    bus = await Bus.connect(nats_server.url, name="test", fast_path=True)
    nc = bus.nc
    assert isinstance(nc, _fastclient.Client)
    seen = _Seen()
    sub = await nc.subscribe_direct("direct.k", seen)
    sid = sub._sub._id
    draining = asyncio.create_task(nc.drain())
    while not nc.is_draining:  # nats-py sets it a step into drain()
        await asyncio.sleep(0)
    with pytest.raises(ConnectionDrainingError):
        await sub.unsubscribe()
    assert (sid in nc._subs) == (sid in nc._direct)  # the handler lives as long as the sub
    await asyncio.wait_for(draining, 5)  # not held by a queue nobody reads
    assert not nc._direct


async def test_a_failed_direct_subscribe_leaves_nothing_behind(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    nc = bus.nc
    assert isinstance(nc, _fastclient.Client)

    async def refused(*args: object, **kwargs: object) -> None:
        raise OSError("connection lost while subscribing")

    subs = dict(nc._subs)
    monkeypatch.setattr(nc, "_send_subscribe", refused)
    with pytest.raises(OSError, match="subscribing"):
        await nc.subscribe_direct("direct.f", _Seen())
    assert not nc._direct
    assert nc._subs == subs


async def test_a_direct_subscription_survives_a_server_restart(
    own_nats_server: NatsServer,
) -> None:
    bus = await Bus.connect(own_nats_server.url, name="test", fast_path=True)
    try:
        nc = bus.nc
        assert isinstance(nc, _fastclient.Client)
        seen = _Seen()
        await nc.subscribe_direct("direct.r", seen)
        await nc.publish("direct.r", b"before")
        await seen.wait_for(1)
        await asyncio.to_thread(own_nats_server.restart, 0.5)
        async with asyncio.timeout(10):
            while not nc.is_connected:
                await asyncio.sleep(0.05)
        # Once resubscribed (the SUB goes out first on the new connection), it delivers.
        async with asyncio.timeout(10):
            while len(seen.got) < 2:
                await nc.publish("direct.r", b"after")
                await nc.flush()
                await asyncio.sleep(0.05)
        assert seen.got[0][2] == b"before" and seen.got[-1][2] == b"after"
    finally:
        await bus.drain()


class _Written:
    """Every byte ``nc`` writes to its socket from now on, in order (writes pass through)."""

    def __init__(self, nc: NATS) -> None:
        self.data = bytearray()
        transport = nc._transport
        assert transport is not None
        write, writelines = transport.write, transport.writelines

        def recorded_write(chunk: bytes) -> None:
            self.data += chunk
            write(chunk)

        def recorded_writelines(chunks: list[bytes]) -> None:
            for chunk in chunks:
                self.data += chunk
            writelines(chunks)

        transport.write = recorded_write  # type: ignore[method-assign]
        transport.writelines = recorded_writelines  # type: ignore[method-assign]


async def _connected(nats_server: NatsServer, *, fast_path: bool) -> NATS:
    nc = wire.new_client(fast_path=fast_path)
    await nc.connect(servers=[nats_server.url], allow_reconnect=False)
    return nc


async def _ignore(_msg: Msg) -> None:
    return None


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "stock"])
async def test_a_round_trip_follows_the_subscription_made_before_it(
    nats_server: NatsServer, fast_path: bool
) -> None:
    # The emergency lane is ready once its subscription is: a PONG that came back for a
    # PING written ahead of the SUB would let a stop published meanwhile pass it by.
    nc = await _connected(nats_server, fast_path=fast_path)
    try:
        written = _Written(nc)
        await nc.subscribe("order.check", cb=_ignore)
        await wire.round_trip(nc)
        sub = written.data.find(b"SUB order.check")
        assert sub >= 0
        assert written.data.rfind(b"PING\r\n") > sub, bytes(written.data)
    finally:
        await nc.close()


async def test_the_fast_client_flushes_behind_what_waits_to_be_written(
    nats_server: NatsServer,
) -> None:
    # nats-py's own flush writes its PING ahead of a SUB still waiting for the flusher
    # (the stock client here); the fast client's comes after it.
    order = {}
    for fast_path in (True, False):
        nc = await _connected(nats_server, fast_path=fast_path)
        try:
            written = _Written(nc)
            await nc.subscribe("order.check", cb=_ignore)
            await nc.flush()
            order[fast_path] = written.data.find(b"PING\r\n") > written.data.find(b"SUB ")
        finally:
            await nc.close()
    assert order == {True: True, False: False}
