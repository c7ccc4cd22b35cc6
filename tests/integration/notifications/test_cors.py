"""Notifications' API from a browser: only the configured origins may read it."""

from __future__ import annotations

import aiohttp
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import InMemoryTupleStore, LocalAuthorizer, grant_tuples
from mowdeck.kit.http import Readiness
from mowdeck.notifications.inbox.routes import ApiDeps, create_app
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.settings import NotificationsSettings
from tests.support.cors import ALLOWED, check_preflights
from tests.unit.notifications.samples import ACCOUNT, at

AUTH = AuthSettings(jwt_secret="notifications-tests-secret-0123456789abcdef")


async def test_a_preflight_from_the_configured_origin_only(
    stores: Stores,
) -> None:
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(grant_tuples(ACCOUNT, "alice", "viewer"))
    deps = ApiDeps(
        inbox=stores.inbox,
        preferences=stores.preferences,
        authorizer=authorizer,
        settings=NotificationsSettings(http_cors_origins=[ALLOWED]),
        clock=lambda: at(0),
        mower_account=lambda _: None,
    )
    app = create_app(deps, TokenVerifier(AUTH), Readiness(), CollectorRegistry())
    token = TokenIssuer(AUTH).mint("alice", ACCOUNT)
    async with TestServer(app) as server, aiohttp.ClientSession() as http:
        await check_preflights(
            http,
            str(server.make_url("/v1/notifications/inbox")),
            "GET",
            headers={"Authorization": f"Bearer {token}"},
        )
