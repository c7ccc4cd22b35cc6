"""PushClient against a scripted HTTP/1.1 server on real loopback sockets (and TLS)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator

import pytest

from mowdeck.notifications.delivery.channels import ChannelSettings, pushhttp
from mowdeck.notifications.delivery.channels.pushhttp import (
    PushClient,
    PushProtocolError,
    PushResponse,
    parse_push_url,
)
from mowdeck.notifications.delivery.targets import ForbiddenAddressError, TargetPolicy
from tests.support.raw_http_server import RawHttpServer, Reply, self_signed

POLICY = TargetPolicy.from_settings(
    ChannelSettings(
        notifications_push_hosts=["127.0.0.1", "localhost"],
        notifications_insecure_hosts=["127.0.0.1", "localhost"],
    )
)
HEADERS = {"TTL": "60", "Content-Encoding": "aes128gcm", "Authorization": "vapid t=x, k=y"}


@pytest.fixture
async def server() -> AsyncIterator[RawHttpServer]:
    async with RawHttpServer() as s:
        yield s


@pytest.fixture
async def client() -> AsyncIterator[PushClient]:
    c = PushClient(POLICY)
    yield c
    await c.close()


async def push(
    client: PushClient, base: str, body: bytes = b"payload", timeout: float = 5.0
) -> PushResponse:
    return await client.post(parse_push_url(base + "/push/abc?x=1"), body, HEADERS, timeout)


async def test_a_post_carries_host_length_headers_and_body(
    client: PushClient, server: RawHttpServer
) -> None:
    server.reply(b"HTTP/1.1 201 Created\r\nLocation: /m/1\r\nContent-Length: 2\r\n\r\nok")
    response = await push(client, server.url, b"\x00\x01binary")
    assert (response.status, response.reason, response.body) == (201, "Created", b"ok")
    assert response.headers["location"] == "/m/1"
    [request] = server.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /push/abc?x=1 HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}" in lines
    assert "Content-Length: 8" in lines
    assert "Content-Encoding: aes128gcm" in lines
    assert body == b"\x00\x01binary"


@pytest.mark.parametrize("status", [404, 410, 500, 503])
async def test_an_error_status_is_answered_and_the_connection_kept(
    client: PushClient, server: RawHttpServer, status: int
) -> None:
    server.reply(f"HTTP/1.1 {status} No\r\nContent-Length: 5\r\n\r\nwhy?\n".encode())
    response = await push(client, server.url)
    assert (response.status, response.body) == (status, b"why?\n")
    assert (await push(client, server.url)).status == 201
    assert server.connections == 1


async def test_retry_after_is_read_in_any_case(client: PushClient, server: RawHttpServer) -> None:
    server.reply(b"HTTP/1.1 429 Too Many Requests\r\nretry-AFTER: 30\r\nContent-Length: 0\r\n\r\n")
    response = await push(client, server.url)
    assert response.status == 429
    assert response.headers.get("Retry-After") == "30"
    assert "Retry-After" in response.headers


async def test_a_redirect_is_answered_not_followed(client: PushClient) -> None:
    async with RawHttpServer() as first, RawHttpServer() as elsewhere:
        first.reply(
            f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {elsewhere.url}/push/abc\r\n"
            "Content-Length: 0\r\n\r\n".encode()
        )
        response = await push(client, first.url)
        assert response.status == 307
        # The sentinel: a push sent to the redirect target itself is the only one it gets.
        assert (await push(client, elsewhere.url, b"sentinel")).status == 201
        assert len(elsewhere.requests) == 1
        assert elsewhere.requests[0].endswith(b"sentinel")


async def test_a_chunked_answer_in_pieces(client: PushClient, server: RawHttpServer) -> None:
    server.reply(
        Reply(
            [
                b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"5;ext=1\r\nhel",
                b"lo\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n",
                b"\r\n",
            ]
        )
    )
    response = await push(client, server.url)
    assert (response.status, response.body) == (201, b"hello world")
    assert (await push(client, server.url)).status == 201
    assert server.connections == 1


async def test_a_content_length_answer_in_pieces(client: PushClient, server: RawHttpServer) -> None:
    server.reply(Reply([b"HTTP/1.1 201 Cre", b"ated\r\nContent-Len", b"gth: 4\r\n\r\nab", b"cd"]))
    response = await push(client, server.url)
    assert (response.status, response.body) == (201, b"abcd")


async def test_an_interim_answer_is_skipped(client: PushClient, server: RawHttpServer) -> None:
    server.reply(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
    assert (await push(client, server.url)).status == 201


async def test_connections_are_kept_alive_and_reused(
    client: PushClient, server: RawHttpServer
) -> None:
    for _ in range(20):
        assert (await push(client, server.url)).status == 201
    assert (server.connections, len(server.requests), client.connects) == (1, 20, 1)


async def test_concurrent_posts_stay_within_the_bound(server: RawHttpServer) -> None:
    client = PushClient(POLICY, limit=3)
    try:
        server.reply(
            *(
                Reply([b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"], stall=0.05)
                for _ in range(30)
            )
        )
        results = await asyncio.gather(*(push(client, server.url) for _ in range(30)))
    finally:
        await client.close()
    assert [r.status for r in results] == [201] * 30
    assert server.connections == 3


async def test_connection_close_is_honoured(client: PushClient, server: RawHttpServer) -> None:
    # The server keeps the connection open: the client must not use it again.
    server.reply(b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    assert (await push(client, server.url)).status == 201
    assert (await push(client, server.url)).status == 201
    assert server.connections == 2


async def test_a_server_closing_between_requests_costs_a_new_connection(
    client: PushClient, server: RawHttpServer
) -> None:
    server.reply(Reply([b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"], close=True))
    assert (await push(client, server.url)).status == 201
    deadline = time.monotonic() + 5
    while client.open_connections and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # until the client has seen the close
    assert client.open_connections == 0
    assert (await push(client, server.url)).status == 201
    assert server.connections == 2


async def test_a_connection_dying_mid_request_is_an_error_never_retried(
    client: PushClient, server: RawHttpServer
) -> None:
    server.reply(Reply([], answer=False))
    with pytest.raises(ConnectionError):
        await push(client, server.url, b"lost")
    assert (await push(client, server.url, b"sentinel")).status == 201
    assert [r.rsplit(b"\r\n\r\n", 1)[1] for r in server.requests] == [b"lost", b"sentinel"]


async def test_a_stall_past_the_timeout(client: PushClient, server: RawHttpServer) -> None:
    server.reply(Reply([b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"], stall=30))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await push(client, server.url, timeout=0.3)
    assert time.monotonic() - started < 5
    # The stalled connection is dropped, not reused with its late answer.
    assert (await push(client, server.url)).status == 201
    assert server.connections == 2


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/2 201\r\n\r\n",
        b"HTTP/1.1 20 Created\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nBad Header\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 201 Created\r\nContent-Length: 999999\r\n\r\n",
    ],
    ids=["version", "status", "header", "length", "coding", "chunk", "too-large"],
)
async def test_a_malformed_answer_is_a_protocol_error(
    client: PushClient, server: RawHttpServer, raw: bytes
) -> None:
    server.reply(raw)
    with pytest.raises(PushProtocolError):
        await push(client, server.url)
    assert (await push(client, server.url)).status == 201


async def test_a_name_resolving_to_loopback_is_refused_unless_exempt(
    server: RawHttpServer,
) -> None:
    # What a name that passed validation and now resolves to 127.0.0.1 (rebinding) meets.
    strict = PushClient(TargetPolicy.from_settings(ChannelSettings()))
    try:
        with pytest.raises(ForbiddenAddressError):
            await push(strict, f"http://localhost:{server.port}")
    finally:
        await strict.close()
    assert server.connections == 0


async def test_tls_with_a_trusted_certificate_and_sni() -> None:
    cert = self_signed("localhost")
    client = PushClient(POLICY, ssl_context=cert.client_context())
    try:
        async with RawHttpServer(tls=cert) as server:
            response = await push(client, f"https://localhost:{server.port}")
            assert response.status == 201
            assert (await push(client, f"https://localhost:{server.port}")).status == 201
    finally:
        await client.close()
    assert server.server_names == ["localhost"]
    assert server.connections == 1


async def test_tls_refuses_an_untrusted_certificate() -> None:
    client = PushClient(POLICY)  # the system's trust store only
    try:
        async with RawHttpServer(tls=self_signed("localhost")) as server:
            with pytest.raises(ssl.SSLCertVerificationError):
                await push(client, f"https://localhost:{server.port}")
            assert server.requests == []
    finally:
        await client.close()


async def test_tls_refuses_a_certificate_for_another_name() -> None:
    cert = self_signed("push.example")
    client = PushClient(POLICY, ssl_context=cert.client_context())
    try:
        async with RawHttpServer(tls=cert) as server:
            with pytest.raises(ssl.SSLCertVerificationError):
                await push(client, f"https://localhost:{server.port}")
            assert server.requests == []
    finally:
        await client.close()


async def test_a_connection_idle_too_long_is_not_reused(
    client: PushClient, server: RawHttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await push(client, server.url)).status == 201
    monkeypatch.setattr(pushhttp, "IDLE_SECONDS", -1.0)  # every idle connection is too old
    assert (await push(client, server.url)).status == 201
    assert server.connections == 2


async def test_waiting_for_a_connection_counts_against_the_timeout(server: RawHttpServer) -> None:
    client = PushClient(POLICY, limit=1)
    try:
        server.reply(Reply([b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"], stall=30))
        stalled = asyncio.ensure_future(push(client, server.url, timeout=10))
        await server.wait_for_requests(1)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await push(client, server.url, b"waits", timeout=0.3)
        assert time.monotonic() - started < 5
        stalled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stalled
        # The cancelled request dropped its connection; the slot is free again.
        assert (await push(client, server.url, b"sentinel")).status == 201
    finally:
        await client.close()
    assert [r.rsplit(b"\r\n\r\n", 1)[1] for r in server.requests] == [b"payload", b"sentinel"]
    assert server.connections == 2
