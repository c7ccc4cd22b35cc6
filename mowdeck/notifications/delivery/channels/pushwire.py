"""The wire side of ``pushhttp``: push URLs split once, HTTP/1.1 answers read and framed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import NamedTuple

import yarl

__all__ = [
    "CHUNKED",
    "MAX_BODY",
    "MAX_HEAD",
    "UNTIL_CLOSE",
    "Head",
    "Origin",
    "PushProtocolError",
    "PushResponse",
    "PushURL",
    "ResponseHeaders",
    "dechunk",
    "parse_head",
    "parse_push_url",
]

# Push services answer with a few headers and a short body; more is not a push service.
MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024


_FORBIDDEN_IN_HEAD = frozenset("\r\n\0")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class PushProtocolError(ConnectionError):
    """The server's answer was not HTTP/1.1 as this client reads it."""


class ResponseHeaders(Mapping[str, str]):
    """Response headers, looked up case-insensitively (the last of repeated ones wins)."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items  # keys in lower case

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """The header ``key`` (any case) or ``default``."""
        return self._items.get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class PushResponse(NamedTuple):
    """A complete answer: status, headers and body."""

    status: int
    reason: str
    headers: ResponseHeaders
    body: bytes


CHUNKED = -1
UNTIL_CLOSE = -2


class Head(NamedTuple):
    """A final answer's head and how its body is framed."""

    status: int
    reason: str
    headers: dict[str, str]
    keep_alive: bool
    length: int  # bytes, or CHUNKED, or UNTIL_CLOSE


def parse_head(head: bytes) -> Head:
    """Status, reason, headers, whether the connection stays open, and the body length."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if version not in ("HTTP/1.1", "HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise PushProtocolError(f"not an HTTP/1.1 status line: {lines[0][:40]!r}")
    status = int(code)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name.rstrip() != name:
            raise PushProtocolError(f"malformed header line: {line[:40]!r}")
        name, value = name.lower(), value.strip()
        if name == "content-length" and headers.get(name, value) != value:
            raise PushProtocolError("conflicting Content-Length headers")
        headers[name] = value
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    keep_alive = version == "HTTP/1.1" and "close" not in tokens
    coding = headers.get("transfer-encoding")
    if status < 200 or status in (204, 304):
        length = 0
    elif coding is not None:
        if coding.lower() != "chunked":
            raise PushProtocolError(f"unsupported Transfer-Encoding {coding[:20]!r}")
        # With both, Transfer-Encoding wins and the connection must not be reused.
        keep_alive = keep_alive and "content-length" not in headers
        length = CHUNKED
    elif "content-length" in headers:
        text = headers["content-length"]
        if not text.isdigit():
            raise PushProtocolError(f"bad Content-Length {text[:20]!r}")
        length = int(text)
        if length > MAX_BODY:
            raise PushProtocolError(f"answer body of {length} bytes")
    else:
        length, keep_alive = UNTIL_CLOSE, False
    return Head(status, reason, headers, keep_alive, length)


def dechunk(buf: bytearray) -> bytes | None:
    """The body of a complete chunked message in ``buf``, None while it is incomplete."""
    body = bytearray()
    pos = 0
    while True:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None
        size_text = bytes(buf[pos:end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise PushProtocolError(f"bad chunk size {size_text[:20]!r}") from None
        pos = end + 2
        if size == 0:
            while True:  # trailer lines up to the empty one
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    return None
                if end == pos:
                    if end + 2 != len(buf):
                        raise PushProtocolError("data after the last chunk")
                    return bytes(body)
                pos = end + 2
        if len(body) + size > MAX_BODY:
            raise PushProtocolError("chunked answer body too large")
        if len(buf) < pos + size + 2:
            return None
        if buf[pos + size : pos + size + 2] != b"\r\n":
            raise PushProtocolError("chunk not followed by CRLF")
        body += buf[pos : pos + size]
        pos += size + 2


class Origin(NamedTuple):
    """Where a pool's connections go."""

    scheme: str
    host: str
    port: int


class PushURL(NamedTuple):
    """A push endpoint split once: its pool, its ``Host`` header and its request target."""

    origin: Origin
    host_header: str
    target: str


def parse_push_url(url: str) -> PushURL:
    """``url`` as a ``PushURL``; ValueError for one this client cannot send to.

    Parsed with yarl, as ``targets.check_url`` parses it, so the origin the policy
    allowed is the one dialled.
    """
    parsed = yarl.URL(url)
    scheme, host, port = parsed.scheme, parsed.raw_host, parsed.port
    if scheme not in _DEFAULT_PORTS or not host or port is None:
        raise ValueError("not an http or https URL with a host")
    if parsed.raw_user is not None or parsed.raw_password is not None:
        raise ValueError("user information in the URL")
    target = parsed.raw_path_qs or "/"
    if not _FORBIDDEN_IN_HEAD.isdisjoint(host + target) or " " in target:
        raise ValueError("white space or control characters in the URL")
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == _DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    return PushURL(Origin(scheme, host, port), host_header, target)
