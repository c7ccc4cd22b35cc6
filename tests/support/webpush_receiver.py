"""A local Web Push service: checks VAPID like a push service, decrypts like a browser.

``subscribe()`` creates a subscription as a browser would (a P-256 key pair and a 16-byte
auth secret) with an endpoint on this server. Every push is checked (the ``vapid`` JWT's
ES256 signature against ``k=``, ``aud`` is this origin, ``exp`` in the future and at most
24 h ahead, ``sub`` a mailto: or https: URL), decrypted with ``http_ece`` and recorded;
the answer is what the test queued for that subscription (201 by default).

Run alone (for benchmarks): ``python -m tests.support.webpush_receiver --subscriptions N
--sample-every 50`` prints ``{"origin", "subscriptions"}`` as one JSON line, answers 201
at once, decrypts one push in ``sample-every`` and reports ``GET /stats``; it stops when
its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import http_ece
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils

__all__ = ["Answer", "BrowserSubscription", "Received", "WebPushReceiver"]

AUTHORIZATION = re.compile(r"vapid t=(?P<t>[^,\s]+),\s*k=(?P<k>[A-Za-z0-9_-]+)")
SUBJECT = re.compile(r"(mailto:\S+@\S+|https://\S+)")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class BrowserSubscription:
    """What a browser keeps of a push subscription (the private half stays here)."""

    id: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes

    @property
    def p256dh(self) -> str:
        raw = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(raw)

    def to_json(self) -> dict[str, Any]:
        """``PushSubscription.toJSON()``."""
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {"p256dh": self.p256dh, "auth": b64url(self.auth)},
        }


@dataclass
class Answer:
    """What to answer one push: a status and headers, after a stall, or a redirect."""

    status: int = 201
    headers: dict[str, str] = field(default_factory=dict)
    stall: float = 0.0
    redirect_to: str | None = None


@dataclass
class Received:
    """One push that passed the VAPID check."""

    subscription_id: str
    payload: dict[str, Any] | None
    headers: dict[str, str]
    claims: dict[str, Any]
    jwt: str


def verify_vapid(header: str, origin: str, now: float) -> tuple[dict[str, Any], str]:
    """The claims of a valid ``vapid`` Authorization header; ValueError says what is wrong."""
    match = AUTHORIZATION.fullmatch(header.strip())
    if match is None:
        raise ValueError(f"not a vapid authorization: {header[:40]!r}")
    token, key = match["t"], match["k"]
    signed, _, signature = token.rpartition(".")
    head_b64, _, claims_b64 = signed.partition(".")
    if json.loads(unb64url(head_b64)).get("alg") != "ES256":
        raise ValueError("JWT alg is not ES256")
    raw = unb64url(signature)
    if len(raw) != 64:
        raise ValueError("ES256 signature is not 64 bytes")
    der = utils.encode_dss_signature(int.from_bytes(raw[:32]), int.from_bytes(raw[32:]))
    public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
    try:
        public.verify(der, signed.encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ValueError("JWT signature does not verify against k=") from None
    claims: dict[str, Any] = json.loads(unb64url(claims_b64))
    if claims.get("aud") != origin:
        raise ValueError(f"aud {claims.get('aud')!r} is not {origin!r}")
    exp = claims.get("exp")
    if not isinstance(exp, int) or not now < exp <= now + 86400:
        raise ValueError(f"exp {exp!r} is not within the next 24 h")
    if not isinstance(claims.get("sub"), str) or not SUBJECT.fullmatch(claims["sub"]):
        raise ValueError(f"sub {claims.get('sub')!r} is not a mailto: or https: URL")
    return claims, token


class WebPushReceiver:
    """A push service on 127.0.0.1 for tests and benchmarks."""

    def __init__(self, *, sample_every: int = 1) -> None:
        self.sample_every = sample_every
        self.subscriptions: dict[str, BrowserSubscription] = {}
        self.received: list[Received] = []
        self.problems: list[str] = []
        self.other_requests: list[str] = []
        self.count = 0
        self.decrypted = 0
        self._answers: dict[str, list[Answer]] = {}
        self._verified: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.origin = ""
        self._arrived = asyncio.Condition()
        self._released = asyncio.Event()

    async def start(self) -> WebPushReceiver:
        app = web.Application(client_max_size=8192)
        app.router.add_post("/push/{id}", self._push)
        app.router.add_get("/stats", self._stats)
        app.router.add_route("*", "/{tail:.*}", self._other)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.origin = f"http://127.0.0.1:{port}"
        return self

    async def close(self) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> WebPushReceiver:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def subscribe(self, name: str | None = None) -> BrowserSubscription:
        """A new browser subscription whose endpoint is on this receiver."""
        sub_id = name or b64url(os.urandom(12))
        sub = BrowserSubscription(
            id=sub_id,
            endpoint=f"{self.origin}/push/{sub_id}",
            private_key=ec.generate_private_key(ec.SECP256R1()),
            auth=os.urandom(16),
        )
        self.subscriptions[sub_id] = sub
        return sub

    def answer(self, sub: BrowserSubscription, *answers: Answer) -> None:
        """Answer the next pushes to ``sub`` so, in order (then 201 again)."""
        self._answers.setdefault(sub.id, []).extend(answers)

    def received_by(self, sub: BrowserSubscription) -> list[Received]:
        return [r for r in self.received if r.subscription_id == sub.id]

    async def wait_for(self, count: int, timeout: float = 5.0) -> None:
        """Until ``count`` pushes passed the checks."""
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.received) >= count), timeout
            )

    async def _push(self, request: web.Request) -> web.StreamResponse:
        self.count += 1
        sub = self.subscriptions.get(request.match_info["id"])
        if sub is None:
            return web.Response(status=404)
        body = await request.read()
        auth = request.headers.get("Authorization", "")
        try:
            if auth not in self._verified:
                verify_vapid(auth, self.origin, time.time())
                self._verified.add(auth)
            claims, token = self._claims(auth)
        except ValueError as err:
            self.problems.append(str(err))
            return web.Response(status=403, text=str(err))
        if request.headers.get("Content-Encoding") != "aes128gcm":
            self.problems.append("Content-Encoding is not aes128gcm")
            return web.Response(status=400)
        payload = None
        if (self.count - 1) % self.sample_every == 0:
            try:
                plain = http_ece.decrypt(
                    body, private_key=sub.private_key, auth_secret=sub.auth, version="aes128gcm"
                )
                payload = json.loads(plain)
                self.decrypted += 1
            except Exception as err:
                self.problems.append(f"cannot decrypt: {type(err).__name__}: {err}")
                return web.Response(status=400)
        headers = {
            k: request.headers[k] for k in ("TTL", "Urgency", "Topic") if k in request.headers
        }
        async with self._arrived:
            self.received.append(Received(sub.id, payload, headers, claims, token))
            self._arrived.notify_all()
        queued = self._answers.get(sub.id)
        answer = queued.pop(0) if queued else Answer()
        if answer.stall:
            # Released early when the receiver closes, so a stalled test ends at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), answer.stall)
        if answer.redirect_to is not None:
            return web.Response(status=answer.status, headers={"Location": answer.redirect_to})
        return web.Response(status=answer.status, headers=answer.headers)

    @staticmethod
    def _claims(auth: str) -> tuple[dict[str, Any], str]:
        match = AUTHORIZATION.fullmatch(auth.strip())
        assert match is not None
        token = match["t"]
        return json.loads(unb64url(token.split(".")[1])), token

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"received": self.count, "decrypted": self.decrypted, "problems": self.problems[:10]}
        )

    async def _other(self, request: web.Request) -> web.Response:
        self.other_requests.append(f"{request.method} {request.path}")
        return web.Response(status=200)


async def _serve(count: int, sample_every: int) -> None:
    receiver = await WebPushReceiver(sample_every=sample_every).start()
    subs = [receiver.subscribe().to_json() for _ in range(count)]
    sys.stdout.write(json.dumps({"origin": receiver.origin, "subscriptions": subs}) + "\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await receiver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subscriptions", type=int, default=100)
    parser.add_argument("--sample-every", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(_serve(args.subscriptions, args.sample_every))


if __name__ == "__main__":
    main()
