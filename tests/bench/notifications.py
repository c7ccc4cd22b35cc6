"""Notifications benchmark: the rules over micro-batches against a naive baseline.

Run: python -m tests.bench.notifications [--smoke]

- 10,000 mowers in 1,000 accounts with 3 subscribers each (every one may view every
  mower of their account; the in-process evaluator on PostgreSQL tuples answers). A
  realistic mix: most states are unchanged heartbeats of
  idle mowers 10 s apart; about 1 % of them cross the battery threshold and fire
  ``battery_low``, which the fan-out delivers to the account's three subscribers.
- Rules (the RESULT's ``rules_states_per_s``): rounds of every mower's state are
  published to JetStream first; states per second from the service's start (cold
  actors, empty tables) to every state evaluated, committed and acknowledged. The
  fan-out runs meanwhile, as in production.
- Naive baseline, same run, same kind of states: one transaction per message (read the
  watch FOR UPDATE, run the rules, write the watch and its events), then ack, as ADR
  0022 words it.
- State to inbox: with the service warm, states are published at 5,000 per second; for
  every firing state, the time from its publish to the ``notifications.sent`` of its
  inbox items (published right after their commit); p99 over all of them.
- Inbox query: p99 of the store's first page (50 items) for users with a full inbox.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import resource
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
from nats.aio.msg import Msg

from contracts.v1 import MowerState, decode_event, decode_state, encode
from contracts.v1.subjects import MSG_ID_HEADER, TELEMETRY, telemetry_subject
from mowdeck.authn import AuthSettings, TokenVerifier
from mowdeck.authz import (
    LocalAuthorizer,
    PostgresTupleStore,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.cli import configure_gc, freezing_service
from mowdeck.notifications.inbox import sql
from mowdeck.notifications.inbox.preferences import Preferences
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.states import STATES_DURABLE
from mowdeck.notifications.pg import pool_options
from mowdeck.notifications.rules.evaluate import evaluate_state
from mowdeck.notifications.rules.watch import decode_watch, encode_watch
from mowdeck.notifications.settings import NotificationsSettings
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

AUTH = AuthSettings(jwt_secret="notifications-benchmark-secret-0123456789abcdef")
MOWERS_PER_ACCOUNT = 10
SUBSCRIBERS = 3
FIRING = 0.01
TABLES = "notification_preferences, notification_watches, notification_pending, notification_inbox"


class Fleet:
    """The mowers, their accounts, and which of them already fired."""

    def __init__(self, mowers: int, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.rng = rng
        self.accounts = [
            uuid.UUID(int=rng.getrandbits(128)) for _ in range(mowers // MOWERS_PER_ACCOUNT)
        ]
        self.mowers = [
            (uuid.UUID(int=rng.getrandbits(128)), self.accounts[i // MOWERS_PER_ACCOUNT])
            for i in range(mowers)
        ]
        self.low: set[uuid.UUID] = set()
        # Recent enough for the rules' clock-skew bound, old enough for every round.
        self.start = datetime.now(UTC) - timedelta(hours=2)
        self.round = 0

    def users(self, account: uuid.UUID) -> list[str]:
        """The account's subscribers."""
        return [f"{account}-u{i}" for i in range(SUBSCRIBERS)]

    def next_round(self) -> tuple[list[MowerState], set[uuid.UUID]]:
        """Every mower's next state; the mowers whose state fires a rule."""
        at = self.start + timedelta(seconds=10 * self.round)
        firing: set[uuid.UUID] = set()
        if self.round > 0:
            fresh = [m for m, _ in self.mowers if m not in self.low]
            firing = set(self.rng.sample(fresh, round(len(self.mowers) * FIRING)))
            self.low |= firing
        self.round += 1
        states = [
            MowerState(
                mower_id=m,
                account_id=a,
                observed_at=at,
                activity="idle",
                battery=15 if m in self.low else 80,
                charging=False,
            )
            for m, a in self.mowers
        ]
        return states, firing


async def publish(bus: Bus, states: Sequence[MowerState]) -> None:
    """Publish as the gateway does (core publishes the stream stores), then flush."""
    for n, state in enumerate(states):
        await bus.nc.publish(
            telemetry_subject(state.mower_id),
            encode(state),
            headers={MSG_ID_HEADER: f"{state.mower_id}:{state.observed_at.timestamp()}"},
        )
        if n % 200 == 0:
            await asyncio.sleep(0)
    await bus.nc.flush()


async def drained(bus: Bus, durable: str, expected: int) -> None:
    """Until the stream holds ``expected`` and the consumer has nothing left."""
    while True:
        info = await bus.js.consumer_info(TELEMETRY.name, durable)
        if (
            info.num_pending == 0
            and info.num_ack_pending == 0
            and info.delivered.stream_seq >= expected
        ):
            return
        await asyncio.sleep(0.01)


async def fresh_stream(bus: Bus) -> None:
    """Empty TELEMETRY and its consumers."""
    with contextlib.suppress(Exception):
        await bus.js.delete_stream(TELEMETRY.name)
    await apply_all(bus)  # the admin step (mowdeck streams)


async def naive(bus: Bus, pool: asyncpg.Pool, states: list[MowerState]) -> float:
    """States per second with one transaction per message, the watch read FOR UPDATE."""
    await fresh_stream(bus)
    await publish(bus, states)
    settings = NotificationsSettings()
    thresholds = settings.thresholds

    async def handle(msg: Msg) -> None:
        state = decode_state(msg.data)
        async with pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "SELECT watch FROM notification_watches WHERE mower_id = $1 FOR UPDATE",
                state.mower_id,
            )
            watch = None if row is None else decode_watch(row[0])
            outcome = evaluate_state(watch, state, datetime.now(UTC), thresholds)
            if outcome.watch is not None and outcome.watch is not watch:
                await conn.execute(
                    "INSERT INTO notification_watches"
                    " (mower_id, account_id, watch, observed_at, contact_at)"
                    " VALUES ($1, $2, $3::jsonb, $4, $5) ON CONFLICT (mower_id)"
                    " DO UPDATE SET watch = excluded.watch, observed_at = excluded.observed_at,"
                    " contact_at = excluded.contact_at, updated_at = now()",
                    state.mower_id,
                    state.account_id,
                    encode_watch(outcome.watch).decode(),
                    outcome.watch.observed_at,
                    outcome.watch.contact_at,
                )
            if outcome.events:
                await conn.execute(sql.INSERT_PENDING, *sql.event_columns(outcome.events))
        await msg.ack()

    spec = ConsumerSpec(stream=TELEMETRY.name, subject="telemetry.>", durable="naive")
    consumer = Consumer(bus, spec, handle)
    started = time.perf_counter()
    await consumer.start()
    await drained(bus, "naive", len(states))
    elapsed = time.perf_counter() - started
    await consumer.stop()
    return len(states) / elapsed


async def setup(pool: asyncpg.Pool, fleet: Fleet) -> LocalAuthorizer:
    """Preferences of every subscriber, and the tuples that let them view their mowers."""
    stores = Stores.postgres(pool)
    # The in-process evaluator on its PostgreSQL tuples (MOWDECK_AUTHZ=local): indexed
    # lookups, as OpenFGA's would be (the in-memory tuple store scans every tuple).
    authorizer = LocalAuthorizer(PostgresTupleStore(pool))
    tuples = [Tuple(account_object(a), "account", mower_object(m)) for m, a in fleet.mowers]
    for account in fleet.accounts:
        for user in fleet.users(account):
            tuples += grant_tuples(account, user, "viewer")
            await stores.preferences.put_preferences(user, account, Preferences(scope="all"))
    await authorizer.write(tuples)
    return authorizer


def cpu_seconds() -> float:
    """This process's CPU time (user and system), where the service runs."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def p99(samples: list[float]) -> float:
    """The 99th percentile."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


async def fanned_out(pool: asyncpg.Pool) -> None:
    """Until the fan-out has completed every pending event."""
    while await pool.fetchval("SELECT count(*) FROM notification_pending"):
        await asyncio.sleep(0.05)


async def latency(
    bus: Bus, pool: asyncpg.Pool, fleet: Fleet, seconds: float, rate: int
) -> list[float]:
    """State publish to notifications.sent, in ms, while publishing at ``rate`` per second."""
    published: dict[uuid.UUID, float] = {}
    samples: list[float] = []

    async def on_sent(msg: Msg) -> None:
        payload = decode_event(msg.data).payload
        sent_at = published.get(payload.mower_id)
        if sent_at is not None:
            samples.append((time.perf_counter() - sent_at) * 1000)

    sub = await bus.nc.subscribe("event.notifications.sent", cb=on_sent)
    chunk = max(1, rate // 100)  # every 10 ms
    loop = asyncio.get_running_loop()
    began = loop.time()
    sent = 0
    while loop.time() - began < seconds:
        states, firing = fleet.next_round()
        for i in range(0, len(states), chunk):
            for state in states[i : i + chunk]:
                if state.mower_id in firing:
                    published[state.mower_id] = time.perf_counter()
                await bus.nc.publish(
                    telemetry_subject(state.mower_id),
                    encode(state),
                    headers={MSG_ID_HEADER: f"{state.mower_id}:{state.observed_at.timestamp()}"},
                )
            sent += chunk
            due = began + sent / rate
            await asyncio.sleep(max(0.0, due - loop.time()))
    # The last notifications: until every state is consumed and the feed went quiet.
    # How long each took after the last publish tells a rules backlog from a fan-out one.
    done = loop.time()
    await asyncio.wait_for(drained(bus, STATES_DURABLE, 0), 120)
    consumed = loop.time()
    await asyncio.wait_for(fanned_out(pool), 120)
    print(
        f"state to inbox: after the last publish, states consumed in {consumed - done:.2f} s,"
        f" pending events fanned out {loop.time() - consumed:.2f} s later"
    )
    await asyncio.sleep(0.5)  # the feed's last messages
    await sub.unsubscribe()
    print(f"state to inbox: published {sent} states at {sent / seconds:,.0f}/s")
    return samples


async def run(smoke: bool, state_batch_max: int, actor_workers: int) -> None:
    """Run every phase and print the figures."""
    mowers = 1000 if smoke else 10_000
    rounds = 3 if smoke else 6
    naive_count = 300 if smoke else 3000
    live_seconds = 2.0 if smoke else 10.0
    server = NatsServer()
    server.start()
    url = await asyncio.to_thread(create_database, "mowdeck_bench")
    try:
        await migrate(url, discover(sql_root(), ["notifications", "authz"]))
        bus = await Bus.connect(server.url, name="bench")
        # The service's pool options, two connections open from the start as before.
        pool = await asyncpg.create_pool(
            url, **{**pool_options(10, statement_timeout_ms=0), "min_size": 2}
        )
        try:
            fleet = Fleet(mowers)
            # -- naive baseline --------------------------------------------------------
            base = Fleet(mowers, seed=8)
            naive_states = [s for _ in range(3) for s in base.next_round()[0]]
            naive_rate = await naive(bus, pool, naive_states[:naive_count])
            await pool.execute(f"TRUNCATE {TABLES}")
            authorizer = await setup(pool, fleet)
            # -- the rules over micro-batches (backlog) ----------------------------------
            await fresh_stream(bus)
            load: list[MowerState] = []
            fired = 0
            for _ in range(rounds):
                states, firing = fleet.next_round()
                load += states
                fired += len(firing)
            await publish(bus, load)
            settings = NotificationsSettings(
                nats_url=server.url,
                database_url=url,
                http_port=0,
                log_level="warning",
                notifications_channels=["ntfy", "log"],
                notifications_state_batch_max=state_batch_max,
                notifications_actor_workers=actor_workers,
            )
            configure_gc(settings)  # as `mowdeck notifications` does for its process
            service = freezing_service(  # as `mowdeck notifications` runs it
                settings,
                bus=bus,
                pool=pool,
                authorizer=authorizer,
                verifier=TokenVerifier(AUTH),
                seed=False,
            )
            started, cpu = time.perf_counter(), cpu_seconds()
            await service.start()
            try:
                await drained(bus, STATES_DURABLE, len(load))
                elapsed = time.perf_counter() - started
                cpu_us = (cpu_seconds() - cpu) / len(load) * 1e6
                rate = len(load) / elapsed
                print(
                    f"rules: {len(load)} states ({fired} firing) in {elapsed:.2f} s"
                    f" ({rate:,.0f}/s, {cpu_us:.0f} us CPU per state in this process);"
                    f" naive {naive_rate:,.0f}/s ({rate / naive_rate:.1f}x)"
                )
                # -- state to inbox while ingesting at 5,000/s --------------------------
                await asyncio.wait_for(fanned_out(pool), 300)  # the backlog's events first
                cpu = cpu_seconds()
                samples = await latency(bus, pool, fleet, live_seconds, 5000)
                print(f"state to inbox: {cpu_seconds() - cpu:.1f} s CPU in this process")
                print(f"state to inbox: {len(samples)} notifications, p99 {p99(samples):.1f} ms")
            finally:
                await service.stop()
            # -- inbox query --------------------------------------------------------------
            stores = Stores.postgres(pool)
            users = [
                r[0]
                for r in await pool.fetch(
                    "SELECT user_id FROM notification_inbox GROUP BY user_id LIMIT 200"
                )
            ]
            timings: list[float] = []
            for i in range(50 if smoke else 500):
                user = users[i % len(users)]
                t = time.perf_counter()
                await stores.inbox.inbox_page(user, 50)
                timings.append((time.perf_counter() - t) * 1000)
            inbox_p99 = p99(timings)
            print(
                f"inbox query: {len(timings)} pages of {len(users)} users, p99 {inbox_p99:.2f} ms"
            )
        finally:
            await pool.close()
            await bus.drain()
    finally:
        server.stop()
        await asyncio.to_thread(drop_database, url)
    print(
        f"RESULT rules_states_per_s={rate:.0f} naive_rules_states_per_s={naive_rate:.0f}"
        f" state_to_inbox_p99_ms={p99(samples):.1f} inbox_query_p99_ms={inbox_p99:.2f}"
    )


def main() -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    parser.add_argument(
        "--state-batch-max",
        type=int,
        default=NotificationsSettings().notifications_state_batch_max,
        help="MOWDECK_NOTIFICATIONS_STATE_BATCH_MAX of the service (default: the setting's)",
    )
    parser.add_argument(
        "--actor-workers",
        type=int,
        default=NotificationsSettings().notifications_actor_workers,
        help="MOWDECK_NOTIFICATIONS_ACTOR_WORKERS of the service (default: the setting's)",
    )
    args = parser.parse_args()
    asyncio.run(run(args.smoke, args.state_batch_max, args.actor_workers))


if __name__ == "__main__":
    main()
