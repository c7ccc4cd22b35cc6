"""The NATS client for the hot path: delivered messages parsed, and acks written, in bulk.

nats-py parses every delivered message with regular expressions and builds its header
dict through a generic line parser; each ``msg.ack()`` is a publish of its own (subject
validation, a command built by string formatting, a flush scheduled). At tens of
thousands of JetStream deliveries a second that is about a third of a consuming
service's CPU (docs/performance.md). The fast client (``new_client(fast_path=True)``)
keeps nats-py's behaviour and replaces only those steps:

- Its parser reads ``MSG``/``HMSG`` control lines by splitting on whitespace instead of
  trying regular expressions; every other operation (``PING``, ``INFO``, ``-ERR``, ...)
  goes through nats-py's own parser, which shares its state.
- Headers without an inline status (every message a service publishes) are parsed by a
  direct equivalent of nats-py's line parser; status messages (flow control, heartbeats,
  pull errors) take nats-py's path.
- ``ack_all`` acknowledges many deliveries with one write: one ``PUB <reply> 0`` each,
  exactly what ``msg.ack()`` sends; ``progress_all`` reports many as still being worked
  on (``+WPI``, what ``msg.in_progress()`` sends), also in one write.
- Publishes with headers build their ``HPUB`` from header names checked once (nats-py
  checks every name with a regular expression on every publish); the bytes are the same.
- ``flush`` (``round_trip`` here) sends its ``PING`` behind the commands still waiting to be
  written, so its ``PONG`` means the server has read them (nats-py writes it ahead of them).
- ``subscribe_direct`` hands each message of a subscription to a plain function, as the
  parser reads it: no ``Msg``, no queue and no task step per message. For subscriptions
  that only look at a message and move on (publish acks, the gateway's emergency lane).

Those overrides use nats-py internals, so they live in ``mowdeck.kit._fastclient``,
imported only by ``new_client`` once the installed nats-py is one of ``TESTED_NATS_PY``
(pyproject.toml pins the same minors). With the fast path off
(``MOWDECK_NATS_FAST_PATH=0``) ``new_client`` returns nats-py's stock client, that module
is never imported, and everything here falls back to public nats-py API: any nats-py 2.x
works then. This module itself imports only public names.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import Final

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import NotJSMessageError

from mowdeck.errors import MowdeckError
from mowdeck.kit.settings import env_name

__all__ = [
    "TESTED_NATS_PY",
    "DirectHandler",
    "DirectSubscription",
    "UntestedNatsPyError",
    "ack_all",
    "check_nats_py",
    "delivery",
    "has_inline_status",
    "has_status",
    "installed_nats_py",
    "is_fast",
    "new_client",
    "parse_header_lines",
    "plain_headers",
    "progress_all",
    "round_trip",
    "subscribe_direct",
]

# The nats-py minors the fast path is tested against (tests/unit/kit, tests/integration/kit).
# 2.15 and older differ: no header-name check or CR/LF folding on publish, and up to 2.14
# headers were parsed by ``email.parser``. Widen together with the pin in pyproject.toml.
TESTED_NATS_PY: Final = ("2.16",)

# Loaded by ``new_client`` only: while it is absent from ``sys.modules`` no fast client
# exists in this process, and nothing here looks at nats-py's internals.
_FAST_MODULE: Final = "mowdeck.kit._fastclient"

# subject, reply, payload, header block (``NATS/1.0...``, or None): the bytes as they came.
DirectHandler = Callable[[bytes, bytes, bytes, bytes | None], None]
MsgHandler = Callable[[Msg], Awaitable[None]]

_CRLF = b"\r\n"
_HDR_LINE = b"NATS/1.0"
_HDR_START = len(_HDR_LINE) + len(_CRLF)
_SPACE = re.compile(r"\s")  # what str.isspace() accepts, as nats-py checks header names
_JS_ACK = ("$JS", "ACK")
_V1_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
_V2_TOKENS = 11  # $JS.ACK.<domain>.<account hash>.<stream>...<pending>[.<random>]


class UntestedNatsPyError(MowdeckError):
    """The fast path is on and the installed nats-py is not a version it is tested with."""


def installed_nats_py() -> str:
    """The version of the installed nats-py distribution."""
    return metadata.version("nats-py")


def check_nats_py(version: str) -> None:
    """Raise ``UntestedNatsPyError`` unless ``version`` is of a minor in ``TESTED_NATS_PY``."""
    minor = ".".join(version.split(".")[:2])
    if minor in TESTED_NATS_PY:
        return
    tested = ", ".join(f"{m}.x" for m in TESTED_NATS_PY)
    raise UntestedNatsPyError(
        f"nats-py {version} is installed, but the NATS fast path (mowdeck/kit/wire.py) is "
        f"tested only with nats-py {tested}; install one of those, or set "
        f"{env_name('nats_fast_path')}=0 to use nats-py's stock client"
    )


def new_client(*, fast_path: bool) -> NATS:
    """A client, not connected yet: the fast one, or nats-py's own with ``fast_path`` off."""
    if not fast_path:
        return NATS()
    check_nats_py(installed_nats_py())
    from mowdeck.kit import _fastclient  # noqa: PLC0415 # nats-py internals: only once tested

    return _fastclient.Client()


def is_fast(nc: object) -> bool:
    """Whether ``nc`` is the fast client (and so has ``subscribe_direct``)."""
    fast = sys.modules.get(_FAST_MODULE)
    return fast is not None and isinstance(nc, fast.Client)


async def round_trip(nc: NATS) -> None:
    """Return once the server has read everything sent on ``nc`` before (a SUB, say).

    nats-py 2.16's ``flush`` writes its ``PING`` straight to the socket, ahead of commands
    still waiting for the client's flusher task (a ``subscribe`` leaves its ``SUB`` there):
    its ``PONG`` can come back before the server has the subscription, and a message
    published elsewhere meanwhile misses it. The fast client queues the ``PING`` behind
    them, so one ``flush`` is enough. On the stock client the first ``flush`` lets the
    flusher write what waited (it runs before any reply can be read), and the second
    ``PING`` follows it on the socket.
    """
    await nc.flush()
    if not is_fast(nc):
        await nc.flush()


async def subscribe_direct(
    nc: NATS, subject: str, handler: DirectHandler, *, fallback: MsgHandler, queue: str = ""
) -> DirectSubscription | Subscription:
    """Subscribe ``handler`` directly on the fast client, else ``fallback`` as a callback.

    On the fast client ``handler(subject, reply, payload, headers)`` gets the bytes as they
    came, on the read loop (``_fastclient.Client.subscribe_direct``); on nats-py's stock
    client ``fallback`` gets each message as a ``Msg``, as any callback subscription.
    Either way the result has ``unsubscribe()`` and ``drain()``.
    """
    if is_fast(nc):
        direct: DirectSubscription = await nc.subscribe_direct(  # type: ignore[attr-defined]
            subject, handler, queue=queue
        )
        return direct
    return await nc.subscribe(subject, queue=queue, cb=fallback)


class DirectSubscription:
    """A subscription made by the fast client's ``subscribe_direct``."""

    def __init__(self, sub: Subscription) -> None:
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


def delivery(reply: str) -> tuple[int, int]:
    """``(num_delivered, stream sequence)`` of a JetStream delivery, from its reply subject.

    What ``msg.metadata`` gives for these two, with its checks (``NotJSMessageError``),
    without building its dataclasses and timestamp on every access.
    """
    tokens = reply.split(".") if reply else []
    count = len(tokens)
    if tuple(tokens[:2]) != _JS_ACK or not (count == _V1_TOKENS or count >= _V2_TOKENS):
        raise NotJSMessageError
    if count == _V1_TOKENS:
        return int(tokens[4]), int(tokens[5])
    return int(tokens[6]), int(tokens[7])


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
    """``Client._parse_header_lines`` of nats-py 2.16, without a generator per header name."""
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


async def ack_all(msgs: Sequence[Msg]) -> None:
    """Acknowledge JetStream deliveries: what ``msg.ack()`` does for each, in one write.

    On the fast client: raises as ``msg.ack()`` would, before anything is sent, for a
    message that is not a JetStream delivery or is already settled (or given twice), and
    ``ValueError`` for messages of different connections. On nats-py's stock client, while
    the fast client is not connected or is draining, and for stand-ins of messages in unit
    tests, each message is acked by ``msg.ack()`` in turn (nats-py's buffering, draining and
    refusals apply).
    """
    fast = sys.modules.get(_FAST_MODULE)
    if fast is None:  # no fast client in this process: no private attribute is read
        for msg in msgs:
            await msg.ack()
        return
    await fast.ack_all(msgs)


async def progress_all(msgs: Sequence[Msg]) -> None:
    """Tell JetStream that deliveries are still being worked on: ``msg.in_progress()``
    for each (``+WPI``, which restarts its ack wait), in one write on the fast client.

    On the fast client deliveries already settled are skipped. On nats-py's stock client,
    while the fast client is not connected or is draining, and for stand-ins of messages
    in unit tests, each is sent by ``msg.in_progress()`` (after an ack the server ignores
    it).
    """
    fast = sys.modules.get(_FAST_MODULE)
    if fast is None:
        for msg in msgs:
            await msg.in_progress()
        return
    await fast.progress_all(msgs)
