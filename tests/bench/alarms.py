"""Alarms benchmark: what the alarm bookkeeping costs the rules, and the alarm listing.

Run: python -m tests.bench.alarms [--smoke]

- Rules (``rules_states_per_s`` with and without alarms): the states of
  ``tests.bench.notifications`` (10,000 mowers, idle heartbeats 10 s apart, 1 % of them
  crossing the battery threshold each round and staying low, so their alarms stay open)
  are planned in batches of 2,000 as the state batcher plans them (``plan_states``), in
  this process, with the alarm rule (``rules/alarms.py``) and without it (the emitter's
  outcome as it was before alarms, without the rule). Three pairs, alternated; the
  RESULT gives the best of each and their ratio (the goal: no more than 5 % fewer). On a
  busy machine the pairs scatter more than the difference: count instructions instead,
  ``valgrind --tool=callgrind`` over ``rules_rate`` with and without alarms and over the
  set-up alone (docs/performance.md, "alarms").
- Listing (``alarms_list_p99_ms``): ``GET /v1/alarms`` through the service's routes on
  PostgreSQL, one account of 10,000 mowers with 1,000 open alarms and 9,000 cleared
  ones, first pages of 50, 300 requests; p99 for a viewer of the whole account and for
  a viewer of 2,000 listed mowers (the goal: under 20 ms), the callers' access cached as
  the service caches it (``inbox.access.AccessCache``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import asyncpg

from contracts.v1 import MowerState
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier, auth_middleware
from mowdeck.authz import (
    DecisionCache,
    LocalAuthorizer,
    PostgresTupleStore,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
    user_ref,
)
from mowdeck.kit.http import Readiness, service_app
from mowdeck.kit.http_server import HttpServer
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.alarms.postgres import PostgresAlarms, write_changes
from mowdeck.notifications.alarms.routes import ALARM_DEPS, AlarmDeps, alarm_routes
from mowdeck.notifications.inbox.access import AccessCache
from mowdeck.notifications.ingest.plan import plan_states
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.pg import pool_options
from mowdeck.notifications.rules import emitter
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.events import AlarmChange, Outcome
from mowdeck.notifications.rules.watch import MowerWatch
from tests.bench.notifications import Fleet, p99
from tests.support.postgres import create_database, drop_database

AUTH = AuthSettings(jwt_secret="alarms-benchmark-secret-0123456789abcdef012345")
BATCH = 2000
PAIRS = 3


def _outcome_without_alarms(self: emitter.Emitter, watch: MowerWatch) -> Outcome[MowerWatch]:
    # The emitter's outcome as it was before alarms: no alarm rule at all.
    return Outcome(watch, self.events, self.suppressed)


def rules_rate(rounds: list[list[MowerState]], *, alarms: bool) -> tuple[float, int]:
    """States per second through ``plan_states``, and the alarm changes decided."""
    real = emitter.Emitter.outcome
    emitter.Emitter.outcome = real if alarms else _outcome_without_alarms  # type: ignore[method-assign]
    try:
        thresholds, watches, changes = Thresholds(), dict[uuid.UUID, MowerWatch](), 0
        now = rounds[-1][0].observed_at + timedelta(seconds=1)
        count = sum(len(r) for r in rounds)
        started = time.perf_counter()
        for states in rounds:
            for i in range(0, len(states), BATCH):
                plan = plan_states(watches, states[i : i + BATCH], now, thresholds)
                changes += len(plan.alarms)
                for write in plan.writes:
                    watches[write.watch.mower_id] = write.watch
        return count / (time.perf_counter() - started), changes
    finally:
        emitter.Emitter.outcome = real  # type: ignore[method-assign]


def rules(mowers: int, rounds: int) -> tuple[float, float, int]:
    fleet = Fleet(mowers)
    load = [fleet.next_round()[0] for _ in range(rounds)]
    best = {True: 0.0, False: 0.0}
    decided = 0
    for pair in range(PAIRS):
        # Alternated, each from a collected heap: the run before leaves no garbage behind.
        for on in (False, True) if pair % 2 == 0 else (True, False):
            gc.collect()
            rate, changes = rules_rate(load, alarms=on)
            best[on] = max(best[on], rate)
            if on:
                decided = changes
            print(f"rules {'with' if on else 'without'} alarms: {rate:,.0f} states/s")
    return best[True], best[False], decided


async def listing(mowers: int, open_alarms: int, requests: int) -> tuple[float, float]:
    url = await asyncio.to_thread(create_database, "mowdeck_bench")
    try:
        await migrate(url, discover(sql_root(), ["notifications", "authz"]))
        pool = await asyncpg.create_pool(url, **pool_options(4, statement_timeout_ms=0))
        try:
            return await _listing(pool, mowers, open_alarms, requests)
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(drop_database, url)


async def _listing(
    pool: asyncpg.Pool, mowers: int, open_alarms: int, requests: int
) -> tuple[float, float]:
    account = uuid.uuid4()
    ids = [uuid.uuid4() for _ in range(mowers)]
    start = datetime.now(UTC) - timedelta(days=1)

    def change(kind: str, n: int, at: datetime) -> AlarmChange:
        return AlarmChange(
            change=kind,  # type: ignore[arg-type]
            mower_id=ids[n],
            account_id=account,
            condition="battery_low",
            kind="battery_low",
            severity="warning",
            at=at,
            params={"battery": 12},
        )

    async with pool.acquire() as conn, conn.transaction():
        # Every mower's alarm raised; all but ``open_alarms`` cleared again.
        await write_changes(
            conn, [change("raised", n, start + timedelta(seconds=n)) for n in range(mowers)]
        )
        later = start + timedelta(hours=1)
        await write_changes(conn, [change("cleared", n, later) for n in range(open_alarms, mowers)])
    await pool.execute("ANALYZE notification_alarms")
    # The in-process evaluator on its PostgreSQL tuples (MOWDECK_AUTHZ=local), as the
    # notifications benchmark asks it: indexed lookups, as OpenFGA's would be.
    authz = LocalAuthorizer(PostgresTupleStore(pool))
    await authz.write(
        [
            *grant_tuples(account, "whole", "viewer"),
            # A member of the account who views the mowers of one group: a fifth of them.
            Tuple(user_ref("some"), "member", account_object(account)),
            Tuple(user_ref("some"), "viewer", "group:bench"),
            *(Tuple("group:bench", "group", mower_object(m)) for m in ids[: mowers // 5]),
            *(Tuple(account_object(account), "account", mower_object(m)) for m in ids),
        ]
    )
    directory = dict.fromkeys(ids, account)
    readiness, metrics = Readiness(), NotificationsMetrics(registry := _registry())
    app = service_app(
        "notifications",
        readiness,
        registry,
        middlewares=[auth_middleware(TokenVerifier(AUTH))],
    )
    # As the service wires it: callers' access kept for the decisions' lifetime.
    decisions = DecisionCache(authz, 60.0)
    access = AccessCache(authz, directory.get, decisions, 60.0)
    app[ALARM_DEPS] = AlarmDeps(
        PostgresAlarms(pool),
        authz,
        directory.get,
        metrics,
        lambda: datetime.now(UTC),
        access=access,
    )
    app.add_routes(alarm_routes())
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        return (
            await _p99(server.url, "whole", account, requests),
            await _p99(server.url, "some", account, requests),
        )
    finally:
        await server.stop()


def _registry() -> Any:
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    return CollectorRegistry()


async def _p99(url: str, user: str, account: uuid.UUID, requests: int) -> float:
    token = TokenIssuer(AUTH).mint(user, account)
    headers = {"Authorization": f"Bearer {token}"}
    samples: list[float] = []
    async with aiohttp.ClientSession(headers=headers) as http:
        for n in range(requests + 20):
            started = time.perf_counter()
            async with http.get(f"{url}/v1/alarms?limit=50") as r:
                body = await r.json()
                assert r.status == 200 and len(body["items"]) == 50, body
            if n >= 20:  # the first ones warm the pool, the caches and the plans
                samples.append((time.perf_counter() - started) * 1000)
    return p99(samples)


def main() -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    args = parser.parse_args()
    mowers, rounds = (1000, 2) if args.smoke else (10_000, 6)
    with_alarms, without, decided = rules(mowers, rounds)
    ratio = with_alarms / without
    print(f"rules: {decided} alarm changes decided; with/without alarms {ratio:.3f}")
    whole, some = asyncio.run(listing(mowers, mowers // 10, 50 if args.smoke else 300))
    print(
        f"RESULT rules_states_per_s={with_alarms:.0f} rules_without_alarms_states_per_s="
        f"{without:.0f} alarms_ratio={ratio:.3f} alarms_list_p99_ms={whole:.2f}"
        f" alarms_list_listed_mowers_p99_ms={some:.2f}"
    )


if __name__ == "__main__":
    main()
