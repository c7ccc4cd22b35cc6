"""A query that would run on is ended by the pool's statement timeout, and answered."""

from __future__ import annotations

import aiohttp
import asyncpg

from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer
from tests.integration.notifications.service.conftest import AUTH, ServiceFactory, grant
from tests.unit.notifications.samples import ACCOUNT


async def test_a_query_past_the_statement_timeout_is_cancelled_and_answered_503(
    make_service: ServiceFactory, authorizer: LocalAuthorizer, pool: asyncpg.Pool
) -> None:
    service = await make_service(own_pool=True, database_statement_timeout_ms=300)
    await grant(authorizer, "alice")
    headers = {"Authorization": f"Bearer {TokenIssuer(AUTH).mint('alice', ACCOUNT)}"}
    url = f"{service.url}/v1/notifications/inbox"
    # A statement that cannot finish: the table is locked until the answer has come.
    async with pool.acquire() as locker, locker.transaction():
        await locker.execute("LOCK TABLE notification_inbox IN ACCESS EXCLUSIVE MODE")
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.get(url, headers=headers) as r,
        ):
            body = await r.json(content_type=None)
    assert (r.status, body["type"].rsplit("/", 1)[-1]) == (503, "unavailable")
