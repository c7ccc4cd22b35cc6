"""The middleware: 401 problem documents for bad tokens, the principal for good ones."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mowdeck.authn import (
    AuthSettings,
    Denial,
    MemoryDenyList,
    TokenIssuer,
    TokenVerifier,
    auth_middleware,
    principal,
)
from mowdeck.kit.http import PROBLEM_CONTENT_TYPE, problem_middleware
from tests.unit.authn.conftest import SECRET

ACCOUNT = uuid.UUID("0000000a-0000-4000-8000-00000000000a")
SETTINGS = AuthSettings(jwt_secret=SECRET)


async def whoami(request: web.Request) -> web.Response:
    who = principal(request)
    return web.json_response({"user": who.user_id, "account": str(who.account_id)})


async def healthz(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


@pytest.fixture
async def client() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    app = web.Application(
        middlewares=[problem_middleware, auth_middleware(TokenVerifier(SETTINGS))]
    )
    app.router.add_get("/v1/whoami", whoami)
    app.router.add_get("/healthz", healthz)
    async with TestClient(TestServer(app)) as c:
        yield c


def token(**changes: object) -> str:
    now = int(time.time())
    payload = {"sub": "olga", "account_id": str(ACCOUNT), "exp": now + 60, **changes}
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, SECRET, "HS256")


async def test_valid_token_puts_the_principal_on_the_request(
    client: TestClient[web.Request, web.Application],
) -> None:
    minted = TokenIssuer(SETTINGS).mint("olga", ACCOUNT, 60)
    response = await client.get("/v1/whoami", headers={"Authorization": f"Bearer {minted}"})
    assert response.status == 200
    assert await response.json() == {"user": "olga", "account": str(ACCOUNT)}


async def test_public_paths_need_no_token(client: TestClient[web.Request, web.Application]) -> None:
    assert (await client.get("/healthz")).status == 200


FAILURES = [
    ("no-header", {}, "missing"),
    ("basic-scheme", {"Authorization": "Basic b2xnYTpwdw=="}, "malformed"),
    ("bearer-without-token", {"Authorization": "Bearer "}, "malformed"),
    ("garbage", {"Authorization": "Bearer x.y.z"}, "malformed"),
    (
        "alg-none",
        {"Authorization": "Bearer " + jwt.encode({"sub": "x"}, "", "none")},
        "algorithm",
    ),
    ("expired", {"Authorization": "Bearer " + token(exp=int(time.time()) - 600)}, "expired"),
    (
        "wrong-key",
        {"Authorization": "Bearer " + jwt.encode({"sub": "x"}, "k" * 40, "HS256")},
        "signature",
    ),
    ("no-account", {"Authorization": "Bearer " + token(account_id=None)}, "missing-claim"),
]


@pytest.mark.parametrize(
    ("headers", "reason"), [(h, r) for _, h, r in FAILURES], ids=[f[0] for f in FAILURES]
)
async def test_bad_tokens_get_a_401_problem(
    client: TestClient[web.Request, web.Application], headers: dict[str, str], reason: str
) -> None:
    response = await client.get("/v1/whoami", headers=headers)
    assert response.status == 401
    assert response.content_type == PROBLEM_CONTENT_TYPE
    body = await response.json()
    assert body["type"].endswith("/unauthenticated")
    assert body["reason"] == reason
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    assert ('error="invalid_token"' in challenge) == (reason != "missing")


def test_principal_without_the_middleware_is_a_programming_error() -> None:
    from aiohttp.test_utils import make_mocked_request  # noqa: PLC0415

    with pytest.raises(RuntimeError, match="auth_middleware"):
        principal(make_mocked_request("GET", "/"))


async def test_a_user_on_the_deny_list_is_refused_with_reason_disabled() -> None:
    denylist = MemoryDenyList()
    app = web.Application(
        middlewares=[
            problem_middleware,
            auth_middleware(TokenVerifier(SETTINGS), denylist=denylist),
        ]
    )
    app.router.add_get("/v1/whoami", whoami)
    async with TestClient(TestServer(app)) as c:
        headers = {"Authorization": f"Bearer {token()}"}
        assert (await c.get("/v1/whoami", headers=headers)).status == 200
        await denylist.deny(Denial(user_id="olga", reason="deleted", at=datetime.now(UTC)))
        refused = await c.get("/v1/whoami", headers=headers)
        assert refused.status == 401
        assert refused.content_type == PROBLEM_CONTENT_TYPE
        assert (await refused.json())["reason"] == "disabled"
        assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]
        other = {"Authorization": f"Bearer {token(sub='pia')}"}
        assert (await c.get("/v1/whoami", headers=other)).status == 200
        denylist.allow("olga")
        assert (await c.get("/v1/whoami", headers=headers)).status == 200
