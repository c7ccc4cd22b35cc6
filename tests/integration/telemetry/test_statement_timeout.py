"""A query that would run on is ended by the pool's statement timeout, and answered."""

from __future__ import annotations

import asyncpg
from structlog.contextvars import merge_contextvars
from structlog.testing import capture_logs

from mowdeck.authn import TokenIssuer
from mowdeck.authz import LocalAuthorizer, Tuple, account_object, grant_tuples, mower_object
from mowdeck.kit.logging import ids_as_text
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
    with capture_logs(processors=[merge_contextvars, ids_as_text]) as logs:
        status, body, answered = await get_while_locked(pool, "mower_history", url, headers)
    assert (status, body["type"].rsplit("/", 1)[-1]) == (503, "query-timeout")
    # Logged naming the service, the mower and the caller's account.
    [timed_out] = [line for line in logs if line["event"] == "query ran out of time"]
    assert (timed_out["service"], timed_out["mower_id"], timed_out["account_id"]) == (
        "telemetry",
        str(MOWER),
        str(ACCOUNT),
    )
    assert answered["Retry-After"]
    waiting = await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%FROM generate_series%'"
        " AND state = 'active' AND pid <> pg_backend_pid()"
    )
    assert waiting == 0
