"""The lean NATS parsing path against nats-py's own parser: the same calls for the same bytes.

These hold ``mowdeck.kit._fastclient`` to the installed nats-py; a nats-py minor goes into
``wire.TESTED_NATS_PY`` and the pin in pyproject.toml only once they pass on it.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import pytest
from nats.aio.client import Client as NatsPyClient
from nats.aio.msg import Msg
from nats.errors import BadHeaderError, NotJSMessageError, ProtocolError
from nats.protocol.parser import Parser

from mowdeck.kit._fastclient import Client, FastParser
from mowdeck.kit.wire import delivery, has_status, parse_header_lines


class _Recorder:
    """Stands in for the client: records what a parser dispatches."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        self.calls.append(("msg", sid, bytes(subject), bytes(reply), data, headers))

    async def _process_ping(self) -> None:
        self.calls.append(("ping",))

    async def _process_pong(self) -> None:
        self.calls.append(("pong",))

    async def _process_info(self, info: dict[str, Any]) -> None:
        self.calls.append(("info", info))

    async def _process_err(self, err: str) -> None:
        self.calls.append(("err", err))


def _stream(rng: random.Random, count: int) -> bytes:
    """A server's side of a connection: deliveries of every shape, and the rest."""
    out = bytearray()
    for n in range(count):
        kind = rng.choice(["msg", "msg-reply", "hmsg", "hmsg-reply", "status", "other"])
        subject = f"telemetry.mower.{rng.getrandbits(64):x}".encode()
        reply = f"$JS.ACK.TELEMETRY.c.1.{n}.{n}.1700000000.{rng.randrange(9)}".encode()
        payload = rng.randbytes(rng.choice([0, 1, 2, 40, 300]))
        headers = b"NATS/1.0\r\nNats-Msg-Id: " + str(n).encode() + b"\r\nX-A:b\r\n\r\n"
        sep = rng.choice([b" ", b"  ", b"\t"])
        sid = str(rng.randrange(1, 99)).encode()
        if kind == "msg":
            out += b"MSG " + subject + sep + sid + b" " + str(len(payload)).encode() + b"\r\n"
            out += payload + b"\r\n"
        elif kind == "msg-reply":
            out += sep.join([b"MSG", subject, sid, reply, str(len(payload)).encode()]) + b"\r\n"
            out += payload + b"\r\n"
        elif kind in ("hmsg", "hmsg-reply", "status"):
            if kind == "status":
                headers = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n"
                payload = b""
            total = str(len(headers) + len(payload)).encode()
            parts = [b"HMSG", subject, sid]
            if kind == "hmsg-reply":
                parts.append(reply)
            out += b" ".join([*parts, str(len(headers)).encode(), total]) + b"\r\n"
            out += headers + payload + b"\r\n"
        else:
            out += rng.choice(
                [
                    b"PING\r\n",
                    b"PONG\r\n",
                    b"+OK\r\n",
                    b"-ERR 'Stale Connection'\r\n",
                    b'INFO {"server_id":"x","max_payload":1048576}\r\n',
                ]
            )
    return bytes(out)


async def _feed(parser: Parser, data: bytes, cuts: list[int]) -> None:
    last = 0
    for cut in [*cuts, len(data)]:
        await parser.parse(data[last:cut])
        last = cut


@pytest.mark.parametrize("seed", range(30))
async def test_the_fast_parser_dispatches_what_nats_py_dispatches(seed: int) -> None:
    rng = random.Random(seed)
    data = _stream(rng, 200)
    # Any split of the bytes, as reads deliver them: mid-line, mid-header, mid-payload.
    cuts = sorted(rng.sample(range(1, len(data)), k=rng.choice([1, 10, 200, 1000])))
    theirs, ours = _Recorder(), _Recorder()
    await _feed(Parser(theirs), data, cuts)
    fast = FastParser(ours)
    await _feed(fast, data, cuts)
    assert ours.calls == theirs.calls
    assert sum(1 for c in ours.calls if c[0] == "msg") > 50
    assert not fast.buf


@pytest.mark.parametrize("seed", range(10))
async def test_direct_subscriptions_get_what_nats_py_would_hand_on_in_order(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    data = _stream(rng, 200)
    cuts = sorted(rng.sample(range(1, len(data)), k=rng.choice([1, 10, 200, 1000])))
    theirs = _Recorder()
    await _feed(Parser(theirs), data, cuts)
    # The real client, with nats-py's own handlers (under its overrides) recording: a
    # message after a PING or an INFO in the same read is parsed by nats-py's parser,
    # and must still reach its direct subscription.
    ours = _Recorder()
    for name in ("_process_msg", "_process_ping", "_process_pong", "_process_info"):
        monkeypatch.setattr(NatsPyClient, name, functools.partialmethod(_forward, name, ours))
    monkeypatch.setattr(
        NatsPyClient, "_process_err", functools.partialmethod(_forward, "_process_err", ours)
    )
    client = Client()

    def direct(sid: int, subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        ours.calls.append(("direct", sid, bytes(subject), bytes(reply), data, hdr))

    client._direct.update({sid: functools.partial(direct, sid) for sid in range(1, 50)})
    await _feed(client._ps, data, cuts)
    # The same messages in the same order; those of the direct ids went the direct way.
    assert [("msg", *c[1:]) if c[0] == "direct" else c for c in ours.calls] == theirs.calls
    assert any(c[0] == "direct" for c in ours.calls)
    assert all(c[1] < 50 for c in ours.calls if c[0] == "direct")
    assert all(c[1] >= 50 for c in ours.calls if c[0] == "msg")
    assert client.stats["in_msgs"] == sum(1 for c in ours.calls if c[0] == "direct")


async def _forward(_client: object, name: str, recorder: _Recorder, *args: Any) -> None:
    await getattr(recorder, name)(*args)


@pytest.mark.parametrize(
    ("headers", "code", "expected"),
    [
        (None, b"503", False),
        (b"NATS/1.0\r\nStatus: 503\r\n\r\n", b"503", False),
        (b"NATS/1.0 503\r\n\r\n", b"503", True),
        (b"NATS/1.0 503 No Responders\r\n\r\n", b"503", True),
        (b"NATS/1.0 404 No Messages\r\n\r\n", b"503", False),
        (b"NATS/1.0 5031\r\n\r\n", b"503", False),
        (b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n", b"100", True),
    ],
)
def test_an_inline_status_is_read_from_the_raw_block(
    headers: bytes | None, code: bytes, expected: bool
) -> None:
    assert has_status(headers, code) is expected


@pytest.mark.parametrize(
    "line",
    [
        b"MSG subject\r\n",
        b"MSG subject 1 reply extra 3\r\n",
        b"MSG subject one 3\r\n",
        b"MSG subject 1 three\r\n",
        b"HMSG subject 1 3\r\n",
        b"HMSG subject 1 a b\r\n",
        b"MSGX subject 1 3\r\n",
        b"MSG subject 1 -3\r\n",
        b"MSG subject 1 1_0\r\n",
        b"HMSG subject +1 1 3\r\n",
    ],
)
async def test_a_malformed_delivery_line_is_a_protocol_error(line: bytes) -> None:
    with pytest.raises(ProtocolError):
        await FastParser(_Recorder()).parse(line + b"abc\r\n")


async def test_a_payload_over_many_reads_arrives_whole() -> None:
    payload = random.Random(7).randbytes(3_000_000)
    data = b"MSG big 1 %d\r\n" % len(payload) + payload + b"\r\nPING\r\nMSG s 1 1\r\nx\r\n"
    cuts = list(range(1448, len(data), 1448))  # one TCP segment per read
    theirs, ours = _Recorder(), _Recorder()
    await _feed(Parser(theirs), data, cuts)
    fast = FastParser(ours)
    await _feed(fast, data, cuts)
    assert ours.calls == theirs.calls
    assert ours.calls[0][4] == payload
    assert not fast.buf


async def test_a_reset_while_a_message_is_handed_on_drops_the_rest_of_the_chunk() -> None:
    # A reconnect resets the parser; what is left of the old connection's chunk is gone.
    class Resetting(_Recorder):
        async def _process_msg(self, *args: Any) -> None:
            await super()._process_msg(*args)
            parser.reset()

    recorder = Resetting()
    parser = FastParser(recorder)
    await parser.parse(b"MSG a 1 1\r\nx\r\nMSG b 1 1\r\ny\r\nMSG c 1 2\r\nhe")
    assert [c[2] for c in recorder.calls] == [b"a"]
    assert not parser.buf


def _header_block(rng: random.Random) -> bytes:
    names = [b"Nats-Msg-Id", b" Padded ", b"Two Words", b"Tab\tName", b"Sep\x1cName"]
    names.append(b"Caf\xc3\xa9")
    values = [b"v", b"  spaced  ", b"", b"caf\xc3\xa9", b"\xff\xfe", b"a:b:c"]
    lines = []
    for _ in range(rng.randrange(0, 6)):
        shape = rng.randrange(4)
        if shape == 0:
            lines.append(b"no colon here")
        elif shape == 1:
            lines.append(b"")
        else:
            lines.append(rng.choice(names) + rng.choice([b":", b": ", b":\t"]) + rng.choice(values))
    return b"\r\n".join(lines) + b"\r\n\r\n"


@pytest.mark.parametrize("seed", range(200))
def test_header_lines_parse_as_nats_py_parses_them(seed: int) -> None:
    raw = _header_block(random.Random(seed))
    assert parse_header_lines(raw) == NatsPyClient()._parse_header_lines(raw)


@pytest.mark.parametrize(
    "headers",
    [
        b"",
        b"NATS/1.0\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: 42\r\nMowdeck-Priority: emergency\r\n\r\n",
        b"NATS/1.0 503\r\n\r\n",
        b"NATS/1.0 404 No Messages\r\n\r\n",
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1016\r\n\r\n",
        b"NATS/1.0 100 FlowControl Request\r\n\r\n",
    ],
)
async def test_headers_and_status_lines_come_out_as_nats_py_makes_them(headers: bytes) -> None:
    assert await Client()._process_headers(headers) == await NatsPyClient()._process_headers(
        headers
    )


@pytest.mark.parametrize(
    ("subject", "reply", "payload", "headers"),
    [
        ("telemetry.mower.1", "", b'{"a":1}', {"Nats-Msg-Id": "m-1"}),
        ("command.mower.2", "_INBOX.x", b"", {"Nats-Msg-Id": "c:1", "Mowdeck-Priority": "high"}),
        ("s", "", b"x" * 5000, {"  Padded ": "  v  ", "Multi": "a\r\nb\nc"}),
        ("s", "", b"x", {" ": "skipped", "K": ""}),
        ("s", "r", b"x", {}),
        ("s", "r", b"x", None),
    ],
)
async def test_publishes_are_the_bytes_nats_py_sends(
    subject: str, reply: str, payload: bytes, headers: dict[str, str] | None
) -> None:
    ours, theirs = Client(), NatsPyClient()
    for client in (ours, theirs, ours):  # twice: the second time from the checked names
        await client._send_publish(subject, reply, payload, len(payload), headers)
    assert ours._pending[0] == ours._pending[1] == theirs._pending[0]


@pytest.mark.parametrize("name", ["Two Words", "Colon:", "Caf\u00e9", "New\nLine"])
async def test_a_header_name_nats_py_refuses_is_refused(name: str) -> None:
    with pytest.raises(BadHeaderError):
        await NatsPyClient()._send_publish("s", "", b"", 0, {name: "v"})
    with pytest.raises(BadHeaderError):
        await Client()._send_publish("s", "", b"", 0, {name: "v"})


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.COMMANDS.device-gateway-0.1.42.7.1700000000000000000.3",
        "$JS.ACK.COMMANDS.device-gateway-0.12.9000000001.8.1700000000000000000.0",
        "$JS.ACK.hub.ACCHASH.COMMANDS.device-gateway-0.2.42.7.1700000000000000000.3.rnd",
        "$JS.ACK._.ACCHASH.COMMANDS.device-gateway-0.5.43.9.1700000000000000000.0",
    ],
)
def test_delivery_counts_are_what_the_metadata_says(reply: str) -> None:
    metadata = Msg(_client=None, reply=reply).metadata  # type: ignore[arg-type]
    assert delivery(reply) == (metadata.num_delivered, metadata.sequence.stream)


@pytest.mark.parametrize("reply", ["", "_INBOX.abc", "$JS.ACK.S.c.1.2", "$JS.NAK.S.c.1.2.3.4.5"])
def test_a_reply_that_is_no_delivery_is_refused_as_the_metadata_refuses_it(reply: str) -> None:
    with pytest.raises(NotJSMessageError):
        delivery(reply)
