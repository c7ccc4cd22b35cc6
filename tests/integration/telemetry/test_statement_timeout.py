"""A query that would run on is ended by the pool's statement timeout, and answered."""

from __future__ import annotations

import asyncpg

from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer, Tuple, account_object, grant_tuples, mower_object
from tests.integration.telemetry.conftest import ServiceFactory
from tests.support.locked import get_while_locked
from tests.unit.telemetry.samples import ACCOUNT, MOWER


async def test_a_query_past_the_statement_timeout_is_cancelled_and_answered_503(
    make_service: ServiceFactory,
    authorizer: LocalAuthorizer,
    issuer: TokenIssuer,
    pool: asyncpg.Pool,
) -> None:
    service = await make_service(own_pool=True, database_statement_timeout_ms=300)
    await authorizer.write(
        [
            *grant_tuples(ACCOUNT, "alice", "viewer"),
            Tuple(account_object(ACCOUNT), "account", mower_object(MOWER)),
        ]
    )
    headers = {"Authorization": f"Bearer {issuer.mint('alice', ACCOUNT)}"}
    url = f"{service.url}/v1/mowers/{MOWER}/history?step=1m"
    status, body, answered = await get_while_locked(pool, "mower_history", url, headers)
    assert (status, body["type"].rsplit("/", 1)[-1]) == (503, "query-timeout")
    assert answered["Retry-After"]
    waiting = await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%FROM generate_series%'"
        " AND state = 'active' AND pid <> pg_backend_pid()"
    )
    assert waiting == 0
