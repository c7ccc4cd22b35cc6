"""How the push client reads answer heads and chunked bodies, and splits push URLs."""

from __future__ import annotations

import pytest

from mowdeck.notifications.delivery.channels.pushhttp import parse_push_url
from mowdeck.notifications.delivery.channels.pushwire import (
    CHUNKED,
    UNTIL_CLOSE,
    PushProtocolError,
    dechunk,
    parse_head,
)


@pytest.mark.parametrize(
    ("head", "keep_alive", "length"),
    [
        (b"HTTP/1.1 201 Created\r\nContent-Length: 3", True, 3),
        (b"HTTP/1.1 201 Created\r\nConnection: Close\r\nContent-Length: 0", False, 0),
        (b"HTTP/1.1 201 Created\r\nConnection: upgrade, close\r\nContent-Length: 0", False, 0),
        (b"HTTP/1.0 201 Created\r\nContent-Length: 0", False, 0),
        (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked", True, CHUNKED),
        (
            b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nContent-Length: 3",
            False,
            CHUNKED,
        ),
        (b"HTTP/1.1 200 OK", False, UNTIL_CLOSE),
        (b"HTTP/1.1 204 No Content", True, 0),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10", True, 0),
    ],
    ids=[
        "length",
        "close",
        "close-token",
        "http10",
        "chunked",
        "both",
        "until-close",
        "204",
        "304",
    ],
)
def test_the_framing_of_an_answer(head: bytes, keep_alive: bool, length: int) -> None:
    parsed = parse_head(head)
    assert (parsed.keep_alive, parsed.length) == (keep_alive, length)


def test_headers_are_kept_lower_case_with_the_reason() -> None:
    parsed = parse_head(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After:  30 \r\nContent-Length: 0")
    assert (parsed.status, parsed.reason) == (429, "Too Many Requests")
    assert parsed.headers == {"retry-after": "30", "content-length": "0"}


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 201 Created\r\nContent-Length: 1\r\nContent-Length: 2",
        b"HTTP/1.1 201 Created\r\nName : value",
        b"ICY 200 OK",
        b"HTTP/1.1 2xx OK",
    ],
    ids=["two-lengths", "space-before-colon", "not-http", "status"],
)
def test_a_bad_head_is_refused(head: bytes) -> None:
    with pytest.raises(PushProtocolError):
        parse_head(head)


def test_a_chunked_body_is_complete_only_at_its_end() -> None:
    whole = b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nTrailer: 1\r\n\r\n"
    for cut in range(len(whole)):
        assert dechunk(bytearray(whole[:cut])) is None
    assert dechunk(bytearray(whole)) == b"abcde"


@pytest.mark.parametrize(
    "raw",
    [b"zz\r\n", b"3\r\nabcX\r\n0\r\n\r\n", b"0\r\n\r\nextra"],
    ids=["size", "no-crlf", "after-end"],
)
def test_a_bad_chunked_body_is_refused(raw: bytes) -> None:
    with pytest.raises(PushProtocolError):
        dechunk(bytearray(raw))


@pytest.mark.parametrize(
    ("url", "host_header", "target", "port"),
    [
        (
            "https://fcm.googleapis.com/fcm/send/abc:def",
            "fcm.googleapis.com",
            "/fcm/send/abc:def",
            443,
        ),
        ("https://push.example:8443/p?q=1#frag", "push.example:8443", "/p?q=1", 8443),
        ("http://127.0.0.1:8080", "127.0.0.1:8080", "/", 8080),
        ("https://[2001:db8::1]/p", "[2001:db8::1]", "/p", 443),
    ],
)
def test_a_push_url_is_split_once(url: str, host_header: str, target: str, port: int) -> None:
    parsed = parse_push_url(url)
    assert (parsed.host_header, parsed.target, parsed.origin.port) == (host_header, target, port)


@pytest.mark.parametrize(
    "url", ["ftp://push.example/p", "https://user:pw@push.example/p", "https:///p"]
)
def test_a_url_the_client_cannot_send_to(url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        parse_push_url(url)
