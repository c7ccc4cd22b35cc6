"""The fast path's client itself: nats-py's ``Client`` and ``Parser`` with lean overrides.

What it does and why is in ``mowdeck.kit.wire``, the module to import. This one reaches
into nats-py internals (``Parser`` state, ``_send_command``, ``_flush_pending``,
``_send_publish``, ``_send_ping``, ``_pongs``, ``_process_headers``, ``_remove_sub``,
``Msg._ackd``, ``BadHeaderError`` of nats-py 2.16) and is imported only by
``wire.new_client`` once the installed nats-py is one of ``wire.TESTED_NATS_PY``: with
``MOWDECK_NATS_FAST_PATH`` off it is never imported.
tests/unit/kit/test_wire.py holds it to nats-py's own parser and publisher and
tests/integration/kit/test_wire.py to a real server, so an upgrade that changes them
fails there, not in production.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import structlog
from nats.aio import client as nats_client
from nats.aio.msg import Msg
from nats.errors import BadHeaderError, MsgAlreadyAckdError, NotJSMessageError, ProtocolError
from nats.protocol.parser import AWAITING_CONTROL_LINE, AWAITING_MSG_PAYLOAD, Parser

from mowdeck.kit.wire import (
    DirectHandler,
    DirectSubscription,
    has_inline_status,
    plain_headers,
)

__all__ = ["Client", "FastParser", "ack_all"]

log = structlog.get_logger("mowdeck.kit")

_CRLF = b"\r\n"
_HDR_LINE = b"NATS/1.0"
_HDR_START = len(_HDR_LINE) + len(_CRLF)
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
        return DirectSubscription(sub)

    async def _send_ping(self, future: asyncio.Future[bool] | None = None) -> None:
        # nats-py writes the PING of ``flush`` straight to the socket, ahead of commands
        # still waiting for its flusher: a PONG then does not mean the server has read a
        # SUB made just before. Here the PING waits its turn behind them. While there is
        # no connection nats-py's way stands: a PING kept for the next one would answer
        # the first flush made after the reconnect, not its own.
        if not self.is_connected:
            await super()._send_ping(future)
            return
        self._pongs.append(future if future is not None else asyncio.Future())
        await self._send_command(nats_client.PING_PROTO)
        await self._flush_pending()

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


def _email_parser() -> object:
    return getattr(nats_client, "parse_email", None)


async def ack_all(msgs: Sequence[Msg]) -> None:
    """``wire.ack_all`` once this module is loaded: deliveries of a fast client in one write."""
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
    """``wire.progress_all`` once this module is loaded: ``+WPI`` for each, in one write."""
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
