"""A query that would run on is ended by the pool's statement timeout, and answered."""

from __future__ import annotations

import asyncpg

from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer
from tests.integration.notifications.service.conftest import AUTH, ServiceFactory, grant
from tests.support.locked import get_while_locked
from tests.unit.notifications.samples import ACCOUNT


async def test_a_query_past_the_statement_timeout_is_cancelled_and_answered_503(
    make_service: ServiceFactory, authorizer: LocalAuthorizer, pool: asyncpg.Pool
) -> None:
    service = await make_service(own_pool=True, database_statement_timeout_ms=300)
    await grant(authorizer, "alice")
    headers = {"Authorization": f"Bearer {TokenIssuer(AUTH).mint('alice', ACCOUNT)}"}
    url = f"{service.url}/v1/notifications/inbox"
    status, body, _ = await get_while_locked(pool, "notification_inbox", url, headers)
    assert (status, body["type"].rsplit("/", 1)[-1]) == (503, "unavailable")
