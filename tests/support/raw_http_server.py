"""A scripted HTTP/1.1 server on 127.0.0.1 that answers raw bytes, for testing HTTP clients.

Each request (head and ``Content-Length`` body) is recorded; the answer is the next
queued ``Reply`` (written as given, in pieces if asked, after a stall if asked), or a
plain 201. The server counts connections and can serve TLS with a certificate made by
``self_signed``, recording the SNI name each client sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["CREATED", "Certificate", "RawHttpServer", "Reply", "self_signed"]

CREATED = b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Reply:
    """Bytes to answer one request with: in ``pieces``, after ``stall`` s, then maybe close."""

    pieces: list[bytes]
    close: bool = False
    stall: float = 0.0
    answer: bool = True  # False: close without answering


@dataclass
class Certificate:
    """A self-signed certificate and its key, as PEM."""

    cert_pem: bytes
    key_pem: bytes

    def server_context(self) -> ssl.SSLContext:
        """A server context presenting this certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
            cert.write_bytes(self.cert_pem)
            key.write_bytes(self.key_pem)
            context.load_cert_chain(cert, key)
        return context

    def client_context(self) -> ssl.SSLContext:
        """``ssl.create_default_context()`` trusting this certificate as well."""
        context = ssl.create_default_context()
        context.load_verify_locations(cadata=self.cert_pem.decode())
        return context


def self_signed(name: str = "localhost") -> Certificate:
    """A fresh P-256 certificate for ``name`` and 127.0.0.1, valid for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Certificate(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


@dataclass
class RawHttpServer:
    """The server; ``async with`` starts it on a free port and stops it."""

    tls: Certificate | None = None
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    server_names: list[str | None] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    _open: dict[asyncio.StreamWriter, asyncio.Task[None]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The base URL on 127.0.0.1."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def reply(self, *replies: Reply | bytes) -> None:
        """Answer the next requests so (then 201 again)."""
        for r in replies:
            self.replies.append(r if isinstance(r, Reply) else Reply([r]))

    async def wait_for_requests(self, count: int, timeout: float = 5.0) -> None:
        """Until ``count`` requests have arrived."""
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.requests) >= count), timeout
            )

    async def __aenter__(self) -> RawHttpServer:
        context = None
        if self.tls is not None:
            context = self.tls.server_context()
            context.sni_callback = lambda _sock, name, _ctx: self.server_names.append(name)
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._released.set()
        assert self._server is not None
        self._server.close()
        # Close the connections clients keep open, so every handler ends before the loop.
        handlers = list(self._open.values())
        for writer in list(self._open):
            writer.close()
        await asyncio.gather(*handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._open[writer] = task
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._open.pop(writer, None)
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        request = head + await reader.readexactly(length)
        reply = self.replies.popleft() if self.replies else Reply([CREATED])
        async with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
        if reply.stall:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), reply.stall)
        if not reply.answer:
            return False
        for piece in reply.pieces:
            writer.write(piece)
            await writer.drain()
            if len(reply.pieces) > 1:
                await asyncio.sleep(0.01)  # so the pieces arrive as separate reads
        return not reply.close
