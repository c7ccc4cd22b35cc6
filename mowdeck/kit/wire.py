"""A leaner NATS client for the hot path: delivered messages parsed, and acks written, in bulk.

nats-py parses every delivered message with regular expressions and builds its header
dict through a generic line parser; each ``msg.ack()`` is a publish of its own (subject
validation, a command built by string formatting, a flush scheduled). At tens of
thousands of JetStream deliveries a second that is about a third of a consuming
service's CPU (docs/performance.md). ``Client`` keeps nats-py's behaviour and replaces
only those steps:

- ``FastParser`` reads ``MSG``/``HMSG`` control lines by splitting on whitespace instead
  of trying regular expressions; every other operation (``PING``, ``INFO``, ``-ERR``, ...)
  goes through nats-py's own parser, which shares its state.
- Headers without an inline status (every message a service publishes) are parsed by a
  direct equivalent of nats-py's line parser; status messages (flow control, heartbeats,
  pull errors) take nats-py's path.
- ``ack_all`` acknowledges many deliveries with one write: one ``PUB <reply> 0`` each,
  exactly what ``msg.ack()`` sends; ``progress_all`` reports many as still being worked
  on (``+WPI``, what ``msg.in_progress()`` sends), also in one write.
- Publishes with headers build their ``HPUB`` from header names checked once (nats-py
  checks every name with a regular expression on every publish); the bytes are the same.
- ``subscribe_direct`` hands each message of a subscription to a plain function, as the
  parser reads it: no ``Msg``, no queue and no task step per message. For subscriptions
  that only look at a message and move on (publish acks, the gateway's emergency lane).

The overrides use nats-py internals (``Parser`` state, ``_send_command``,
``_flush_pending``, ``_send_publish``, ``Msg._ackd``); tests/unit/kit/test_wire.py holds
them to nats-py's own parser and publisher and tests/integration/kit/test_wire.py to a
real server, so an upgrade that changes them fails there, not in production.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from nats.aio import client as nats_client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import BadHeaderError, MsgAlreadyAckdError, NotJSMessageError, ProtocolError
from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, Parser

__all__ = [
    "Client",
    "DirectHandler",
    "DirectSubscription",
    "FastParser",
    "ack_all",
    "delivery",
    "has_inline_status",
    "has_status",
    "parse_header_lines",
    "plain_headers",
    "progress_all",
]

log = structlog.get_logger("mowdeck.kit")

# subject, reply, payload, header block (``NATS/1.0...``, or None): the bytes as they came.
DirectHandler = Callable[[bytes, bytes, bytes, bytes | None], None]

_CRLF = b"\r\n"
_HDR_LINE = b"NATS/1.0"
_HDR_START = len(_HDR_LINE) + len(_CRLF)
_SPACE = re.compile(r"\s")  # what str.isspace() accepts, as nats-py checks header names
_H = ord("H")
_M = ord("M")
_HEADER_KEY = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # nats-py's rule for names
_HEADER_VALUE_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_HEADER_KEYS_MAX = 1024


class FastParser(Parser):
    """nats-py's protocol parser with a direct path for ``MSG`` and ``HMSG``."""

    async def parse(self, data: bytes = b"") -> None:
        """Parse ``data`` (after what is buffered) and dispatch every whole message."""
        # Read by position in the chunk as it came: no copy of the rest per message (a
        # bytearray and a ``del`` of each message), only what is left at the end is kept.
        own = self.buf
        if own:
            if self.state == AWAITING_MSG_PAYLOAD and len(own) + len(data) < self.needed + 2:
                own.extend(data)  # a large payload still arriving: append, copy once at the end
                return
            own.extend(data)
            data = bytes(own)
            own.clear()
        nc = self.nc
        pos = 0
        size = len(data)
        while pos < size:
            if self.state == AWAITING_CONTROL_LINE:
                if data[pos] not in (_H, _M):
                    own.extend(data[pos:])
                    await Parser.parse(self)  # PING, PONG, +OK, -ERR, INFO
                    return
                end = data.find(_CRLF, pos)
                if end < 0:
                    break  # the rest of the line is still on its way
                self._control_line(data[pos:end].split())
                pos = end + 2
                self.state = AWAITING_MSG_PAYLOAD
            needed = self.needed
            if size - pos < needed + 2:
                break
            header_needed = self.header_needed
            hdr = data[pos : pos + header_needed] if header_needed else None
            payload = data[pos + header_needed : pos + needed]
            self.header_needed = 0
            pos += needed + 2
            self.state = AWAITING_CONTROL_LINE
            arg = self.msg_arg
            await nc._process_msg(arg["sid"], arg["subject"], arg["reply"], payload, hdr)
            if self.buf is not own:
                return  # reset meanwhile (a reconnect): the rest belongs to a dead connection
        if pos < size:
            own.extend(data[pos:])

    def _control_line(self, args: list[bytes]) -> None:
        # MSG <subject> <sid> [reply] <size>; HMSG <subject> <sid> [reply] <hdr size> <size>
        op = args[0]
        count = len(args)
        numbers: tuple[bytes, ...]
        if op == b"HMSG" and count in (5, 6):
            numbers = (args[2], args[-2], args[-1])
        elif op == b"MSG" and count in (4, 5):
            numbers = (args[2], args[-1])
        else:
            raise ProtocolError("nats: malformed MSG")
        # Plain digits only, as nats-py's expression: int() would also take "-5" or "1_0".
        if not all(n.isdigit() for n in numbers):
            raise ProtocolError("nats: malformed MSG")
        if op == b"HMSG":
            self.header_needed = int(args[-2])
        arg = self.msg_arg
        arg["subject"] = args[1]
        arg["sid"] = int(args[2])
        arg["reply"] = args[3] if count == (6 if op == b"HMSG" else 5) else b""
        self.needed = int(args[-1])


_V1_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>


def delivery(reply: str) -> tuple[int, int]:
    """``(num_delivered, stream sequence)`` of a JetStream delivery, from its reply subject.

    What ``msg.metadata`` gives for these two, with its checks (``NotJSMessageError``),
    without building its dataclasses and timestamp on every access.
    """
    tokens = Msg.Metadata._get_metadata_fields(reply)
    if len(tokens) == _V1_TOKENS:
        return int(tokens[4]), int(tokens[5])
    return int(tokens[Msg.Ack.NumDelivered]), int(tokens[Msg.Ack.StreamSeq])


def has_status(headers: bytes | None, code: bytes) -> bool:
    """Whether a raw header block carries the inline status ``code`` (``NATS/1.0 503``)."""
    if headers is None or not has_inline_status(headers):
        return False
    status = headers[_HDR_START - 1 : headers.find(_CRLF)].split(None, 1)
    return bool(status) and status[0] == code


def has_inline_status(block: bytes) -> bool:
    """Whether a raw header block starts with an inline status (``NATS/1.0 503``)."""
    return block[len(_HDR_LINE) : len(_HDR_LINE) + 1] == b" "


def plain_headers(block: bytes) -> dict[str, str] | None:
    """The headers of a raw block without an inline status, as nats-py gives them."""
    return parse_header_lines(block[_HDR_START:]) or None


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """``Client._parse_header_lines`` of nats-py, without a generator per header name."""
    out: dict[str, str] = {}
    for line in raw.split(_CRLF):
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip()
        if not name.isascii():
            continue  # nats-py skips names it cannot decode as ASCII
        key = name.decode("ascii")
        if _SPACE.search(key):
            continue
        out[key] = value.strip().decode("utf-8", "replace")
    return out


class Client(nats_client.Client):
    """nats-py's client with ``FastParser``, the direct header path and lean ``HPUB``s."""

    def __init__(self) -> None:
        super().__init__()
        self._ps = FastParser(self)
        self._header_keys: dict[str, bytes] = {}
        self._direct: dict[int, DirectHandler] = {}

    async def subscribe_direct(
        self, subject: str, handler: DirectHandler, *, queue: str = ""
    ) -> DirectSubscription:
        """Subscribe with ``handler`` called for each message, on the read loop, as parsed.

        ``handler(subject, reply, payload, headers)`` gets the bytes as they came (the
        header block raw, or None); it must be quick and must not block. What it raises
        is logged and the message dropped; the connection goes on. The subscription
        survives reconnects like any other; it has no pending limits, ``max_msgs`` or
        JetStream flow control, so it is for core subjects only.
        """
        # Registered under the id nats-py is about to give it, before the SUB is sent:
        # no message can reach the queue of a callback-less subscription meanwhile.
        sid = self._sid + 1
        self._direct[sid] = handler
        try:
            sub = await self.subscribe(subject, queue=queue)
        except BaseException:
            self._remove_sub(sid)  # also if nats-py had taken it in before it failed
            raise
        if sub._id != sid:  # nats-py numbered it otherwise: never hand it out half-wired
            self._direct.pop(sid, None)
            await sub.unsubscribe()
            raise RuntimeError(f"nats: subscription id {sub._id}, expected {sid}")
        return DirectSubscription(self, sub)

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        # Both parsers hand every message here (nats-py's takes the rest of a read that
        # began with a PING or an INFO).
        handler = self._direct.get(sid)
        if handler is not None:
            stats = self.stats
            stats["in_msgs"] += 1
            stats["in_bytes"] += len(data)
            try:
                handler(subject, reply, data, headers)
            except Exception:
                where = subject.decode("utf-8", "replace")
                log.exception("direct subscription handler failed", subject=where)
            return
        # ``headers`` is None for a message without, as nats-py's own parser passes it.
        await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]

    def _remove_sub(self, sid: int, max_msgs: int = 0) -> None:
        # The handler goes with the subscription, not before: a direct subscription that
        # nats-py still holds (an unsubscribe refused while the connection drains) must
        # not send its messages to a queue nobody reads, which the drain would wait for.
        self._direct.pop(sid, None)
        super()._remove_sub(sid, max_msgs)

    async def _send_publish(
        self,
        subject: str,
        reply: str,
        payload: bytes,
        payload_size: int,
        headers: dict[str, Any] | None,
    ) -> None:
        # nats-py builds the header block byte by byte, checking each name with a regular
        # expression, and the command by string formatting. The same bytes, built from
        # names checked once.
        if not headers or not subject:
            await super()._send_publish(subject, reply, payload, payload_size, headers)
            return
        block = [_HDR_LINE, _CRLF]
        for name, value in headers.items():
            key = self._header_keys.get(name)
            if key is None:
                key = self._header_key(name)
            if key:
                block.append(key)
                block.append(value.strip().translate(_HEADER_VALUE_NEWLINES).encode())
                block.append(_CRLF)
        block.append(_CRLF)
        hdr = b"".join(block)
        command = b"HPUB %s %s %d %d\r\n" % (
            subject.encode(),
            reply.encode(),
            len(hdr),
            len(hdr) + len(payload),
        )
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += payload_size
        await self._send_command(b"".join((command, hdr, payload, _CRLF)))
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()

    def _header_key(self, name: str) -> bytes:
        key = name.strip()
        if not key:
            return b""  # nats-py skips empty names
        if not _HEADER_KEY.fullmatch(key):
            raise BadHeaderError(key)
        encoded = key.encode() + b": "
        if len(self._header_keys) < _HEADER_KEYS_MAX:
            self._header_keys[name] = encoded
        return encoded

    async def _process_headers(self, headers: Any) -> dict[str, str] | None:
        if (
            not headers
            or _email_parser() is not None  # an installed C parser: nats-py's path
            or len(headers) <= _HDR_START
            or has_inline_status(headers)  # nats-py's path
        ):
            result: dict[str, str] | None = await super()._process_headers(headers)
            return result
        return plain_headers(headers)


class DirectSubscription:
    """A subscription made by ``Client.subscribe_direct``."""

    def __init__(self, client: Client, sub: Subscription) -> None:
        self._client = client
        self._sub = sub

    @property
    def subject(self) -> str:
        """The subject subscribed to."""
        return str(self._sub.subject)

    async def unsubscribe(self) -> None:
        """Stop at once; messages still on their way are dropped."""
        await self._sub.unsubscribe()

    async def drain(self) -> None:
        """Stop after every message the server sent before it (a round trip) is handled."""
        await self._sub.drain()  # type: ignore[no-untyped-call] # untyped in nats-py


def _email_parser() -> object:
    return getattr(nats_client, "parse_email", None)


async def ack_all(msgs: Sequence[Msg]) -> None:
    """Acknowledge JetStream deliveries: what ``msg.ack()`` does for each, in one write.

    Raises as ``msg.ack()`` would, before anything is sent, for a message that is not a
    JetStream delivery or is already settled (or given twice), and ``ValueError`` for
    messages of different connections. While the client is not connected or is draining,
    and for stand-ins of messages in unit tests, each message is acked by ``msg.ack()``
    (nats-py's buffering and draining rules apply).
    """
    if not msgs:
        return
    nc = getattr(msgs[0], "_client", None)  # in-memory stand-ins have none
    if not isinstance(nc, Client) or not nc.is_connected or nc.is_draining_pubs:
        for msg in msgs:
            await msg.ack()
        return
    commands = []
    seen: set[int] = set()
    for msg in msgs:
        if msg._client is not nc:
            raise ValueError("ack_all: messages of different connections")
        reply = msg.reply
        if not reply:
            raise NotJSMessageError
        if msg._ackd or id(msg) in seen:
            raise MsgAlreadyAckdError(msg)
        seen.add(id(msg))
        commands.append(b"PUB " + reply.encode() + b" 0\r\n\r\n")
    await nc._send_command(b"".join(commands))
    nc.stats["out_msgs"] += len(commands)
    for msg in msgs:
        msg._ackd = True
    if nc._flush_queue is not None and nc._flush_queue.empty():
        await nc._flush_pending()


async def progress_all(msgs: Sequence[Msg]) -> None:
    """Tell JetStream that deliveries are still being worked on: ``msg.in_progress()``
    for each (``+WPI``, which restarts its ack wait), in one write.

    Deliveries already settled are skipped (``in_progress`` after an ack would be a
    no-op on the server anyway). While the client is not connected or is draining, and
    for stand-ins of messages in unit tests, each is sent by ``msg.in_progress()``.
    """
    live = [msg for msg in msgs if not msg._ackd]
    if not live:
        return
    nc = getattr(live[0], "_client", None)
    if not isinstance(nc, Client) or not nc.is_connected or nc.is_draining_pubs:
        for msg in live:
            await msg.in_progress()
        return
    commands = []
    for msg in live:
        if msg._client is not nc:
            raise ValueError("progress_all: messages of different connections")
        if not msg.reply:
            raise NotJSMessageError
        commands.append(b"PUB " + msg.reply.encode() + b" 4\r\n+WPI\r\n")
    await nc._send_command(b"".join(commands))
    nc.stats["out_msgs"] += len(commands)
    if nc._flush_queue is not None and nc._flush_queue.empty():
        await nc._flush_pending()
