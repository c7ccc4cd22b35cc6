"""Telemetry ingest and query benchmark: fingerprinted micro-batches against a naive store.

Run: python -m tests.bench.telemetry [--smoke]

- Ingest: 1,000 mowers publish a realistic mix (most mowers idle, sending unchanged
  heartbeats every 10 s; a fifth mowing, moving every message and losing battery now and
  then). Measured twice, each time with a fresh service (cold actors) on empty tables:
  - live (the RESULT's ``states_per_s``): publishers in their own processes publish
    while the service ingests; states per second from the first publish to the last
    state committed and acknowledged. Two publishers, each owning half of the mowers
    like two gateway shards, and publishing as the gateway does (core publishes into the
    stream, no per-message ack). The publishers' own rate is printed too: when it is
    close, the publishers were the limit, not Telemetry.
  - backlog: everything is published to JetStream first; states per second from the
    service's start to every message committed and acknowledged.
- Transport alone: the same messages delivered by the same kind of consumer whose
  callback only acknowledges; the ceiling of any ingest on this machine.
- Naive baseline, same run, same kind of messages: every state stored, one transaction
  per message (read FOR UPDATE, upsert latest, insert history and position), then ack.
- History rows per idle mower and day: idle mowers' heartbeats over a simulated day.
- History query: p99 of ``GET /history`` over 31 days at a 1 h step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import resource
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import aiohttp
import asyncpg
import msgspec
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1 import MowerState, Position, encode
from contracts.v1.subjects import (
    MSG_ID_HEADER,
    TELEMETRY,
    TELEMETRY_FILTER,
    telemetry_subject,
)
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import (
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    mower_object,
)
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry import sql
from mowdeck.telemetry.cli import configure_gc, freezing_service
from mowdeck.telemetry.parts import STATES_DURABLE, STATES_SUBJECT
from mowdeck.telemetry.service import TelemetryService
from mowdeck.telemetry.settings import TelemetrySettings
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

START = datetime(2026, 5, 1, tzinfo=UTC)
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000be")
AUTH = AuthSettings(jwt_secret="telemetry-benchmark-secret-0123456789abcdef")
PUBLISHERS = 2
_YIELD_EVERY = 100
TABLES = "mower_latest, mower_history, mower_positions, command_timeline, mower_directory"


def states(mowers: int, rounds: int, *, mowing_share: float = 0.2) -> list[MowerState]:
    """``rounds`` states of each mower, 10 s apart, round by round."""
    ids = [uuid.UUID(int=i + 1) for i in range(mowers)]
    mowing = int(mowers * mowing_share)
    out = []
    for r in range(rounds):
        at = START + timedelta(seconds=10 * r)
        for i, mower_id in enumerate(ids):
            if i < mowing:
                out.append(
                    MowerState(
                        mower_id=mower_id,
                        account_id=ACCOUNT,
                        observed_at=at,
                        activity="mowing",
                        battery=max(0, 100 - r // 30),
                        rtk_fix="fixed",
                        connection="wifi",
                        speed_mps=0.5,
                        position=Position(lat=52.5 + r * 4e-5, lon=13.4 + i * 1e-4),
                    )
                )
            else:
                out.append(
                    MowerState(
                        mower_id=mower_id,
                        account_id=ACCOUNT,
                        observed_at=at,
                        activity="docked",
                        battery=100,
                        charging=False,
                        rtk_fix="fixed",
                        connection="wifi",
                        position=Position(lat=52.4, lon=13.4 + i * 1e-4),
                    )
                )
    return out


async def publish(bus: Bus, batch: list[MowerState], *, acked: bool = True) -> None:
    """Publish the states, many in flight, and wait for every stream ack.

    ``acked=False`` publishes as the gateway publishes states: core publishes that the
    stream stores (and de-duplicates by ``Nats-Msg-Id``), no per-message ack; the run
    checks at the end that the stream holds every message.
    """
    send = bus.js.publish_async if acked else bus.nc.publish
    for n, state in enumerate(batch):
        await send(
            telemetry_subject(state.mower_id),
            encode(state),
            headers={MSG_ID_HEADER: f"{state.mower_id}:{n}"},
        )
        if not acked and n % _YIELD_EVERY == 0:
            # A core publish never waits: without a turn of the loop now and then the
            # client would buffer every state and write them all at the end, and the
            # service would see nothing until then. The gateway's loop turns all the time.
            await asyncio.sleep(0)
    if acked:
        await bus.js.publish_async_completed()
    else:
        await bus.nc.flush()


async def publisher_main(url: str, rounds: int, part: int, parts: int) -> None:
    """A live publisher's process: build its share of states, say ready, publish on "go".

    Each publisher owns every ``parts``-th mower, as a gateway shard owns its mowers.
    """
    bus = await Bus.connect(url, name=f"bench-publisher-{part}")
    load = [s for s in states(1000, rounds) if s.mower_id.int % parts == part]
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    started = time.perf_counter()
    await publish(bus, load, acked=False)
    print(f"published {len(load) / (time.perf_counter() - started):.0f}", flush=True)
    await bus.drain()


@dataclass
class Live:
    """The live phase: rates, and CPU per state of the service's process and nats-server."""

    rate: float
    publisher_rate: float
    service_us: float
    server_us: float


def own_cpu_seconds() -> float:
    """User and system CPU time of this process, all threads (the service runs here)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def live(
    bus: Bus, url: str, make: Callable[[], TelemetryService], rounds: int, *, server_pid: int
) -> Live:
    """States/s from the first publish to the last commit, and to the last publish; the
    CPU this process (the service, mostly) and nats-server spent per state meanwhile."""
    await fresh_stream(bus)
    service = make()
    await service.start()
    publishers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.bench.telemetry",
            "--publish",
            url,
            "--rounds",
            str(rounds),
            "--part",
            f"{part}/{PUBLISHERS}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for part in range(PUBLISHERS)
    ]
    for publisher in publishers:
        assert publisher.stdin is not None
        assert publisher.stdout is not None
        assert (await publisher.stdout.readline()).strip() == b"ready"
    for publisher in publishers:
        assert publisher.stdin is not None
        publisher.stdin.write(b"go\n")
        await publisher.stdin.drain()
    started = time.perf_counter()
    own_cpu, server_cpu = own_cpu_seconds(), cpu_seconds(server_pid)
    for publisher in publishers:
        assert publisher.stdout is not None
        await publisher.stdout.readline()
        await publisher.wait()
    published_at = time.perf_counter() - started
    await drained(bus, STATES_DURABLE)
    elapsed = time.perf_counter() - started
    own_cpu, server_cpu = own_cpu_seconds() - own_cpu, cpu_seconds(server_pid) - server_cpu
    await service.stop()
    total = 1000 * rounds
    info = await bus.js.stream_info(TELEMETRY.name)
    assert info.state.messages == total, info.state.messages
    return Live(
        total / elapsed, total / published_at, own_cpu / total * 1e6, server_cpu / total * 1e6
    )


async def drained(bus: Bus, durable: str) -> None:
    """Wait until the durable consumer has nothing pending and nothing unacknowledged."""
    while True:
        info = await bus.js.consumer_info(TELEMETRY.name, durable)
        if info.num_pending == 0 and info.num_ack_pending == 0:
            return
        await asyncio.sleep(0.01)


async def fresh_stream(bus: Bus) -> None:
    """Empty TELEMETRY and its consumers."""
    with contextlib.suppress(Exception):  # absent on the first call
        await bus.js.delete_stream(TELEMETRY.name)
    await apply_all(bus)  # the admin step (mowdeck streams)


async def naive(bus: Bus, pool: asyncpg.Pool, batch: list[MowerState]) -> float:
    """States per second when every state is stored, one transaction per message."""
    await fresh_stream(bus)
    await publish(bus, batch)

    async def store(msg: object) -> None:
        from contracts.v1 import decode_state  # noqa: PLC0415

        s = decode_state(msg.data)  # type: ignore[attr-defined]
        pos = s.position
        async with pool.acquire() as conn, conn.transaction():
            await conn.fetchrow(
                "SELECT observed_at FROM mower_latest WHERE mower_id = $1 FOR UPDATE", s.mower_id
            )
            await conn.execute(
                "INSERT INTO mower_latest (mower_id, account_id, observed_at, activity, battery,"
                " charging, rtk_fix, lat, lon, state_fp) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,0)"
                " ON CONFLICT (mower_id) DO UPDATE SET observed_at = excluded.observed_at,"
                " battery = excluded.battery, lat = excluded.lat, lon = excluded.lon"
                " WHERE mower_latest.observed_at <= excluded.observed_at",
                s.mower_id,
                s.account_id,
                s.observed_at,
                s.activity,
                s.battery,
                s.charging,
                s.rtk_fix,
                pos.lat if pos else None,
                pos.lon if pos else None,
            )
            await conn.execute(
                "INSERT INTO mower_history (mower_id, observed_at, account_id, activity, battery,"
                " charging, rtk_fix) VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT DO NOTHING",
                s.mower_id,
                s.observed_at,
                s.account_id,
                s.activity,
                s.battery,
                s.charging,
                s.rtk_fix,
            )
            if pos is not None:
                await conn.execute(
                    "INSERT INTO mower_positions (mower_id, observed_at, account_id, lat, lon,"
                    " rtk_fix) VALUES ($1,$2,$3,$4,$5,$6) ON CONFLICT DO NOTHING",
                    s.mower_id,
                    s.observed_at,
                    s.account_id,
                    pos.lat,
                    pos.lon,
                    s.rtk_fix,
                )
        await msg.ack()  # type: ignore[attr-defined]

    spec = ConsumerSpec(stream=TELEMETRY.name, subject=STATES_SUBJECT, durable="naive")
    consumer = Consumer(bus, spec, store)
    started = time.perf_counter()
    await consumer.start()
    await drained(bus, "naive")
    elapsed = time.perf_counter() - started
    await consumer.stop()
    return len(batch) / elapsed


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def transport(
    bus: Bus, url: str, batch: list[MowerState], *, server_pid: int, subject: str = STATES_SUBJECT
) -> tuple[float, float]:
    """States per second that JetStream and nats-py alone deliver and acknowledge.

    The same stream, messages and kind of consumer as the service (a push queue
    subscription, explicit acks), on a connection of its own, with a callback that only
    acknowledges: the ceiling of any ingest on this machine, whatever it does per state.
    Returns the rate and nats-server's CPU per state meanwhile (µs).
    """
    await fresh_stream(bus)
    await publish(bus, batch)
    consumer = await Bus.connect(url, name="bench-transport")
    done = asyncio.get_running_loop().create_future()
    count = 0

    async def ack(msg: Msg) -> None:
        nonlocal count
        await msg.ack()
        count += 1
        if count == len(batch):
            done.set_result(None)

    durable = "transport"
    config = api.ConsumerConfig(
        durable_name=durable,
        deliver_group=durable,
        ack_policy=api.AckPolicy.EXPLICIT,
        max_ack_pending=20_000,
    )
    started = time.perf_counter()
    server_cpu = cpu_seconds(server_pid)
    await consumer.js.subscribe(
        subject,
        durable=durable,
        queue=durable,
        config=config,
        cb=ack,
        manual_ack=True,
        stream=TELEMETRY.name,
    )
    await done
    elapsed = time.perf_counter() - started
    server_cpu = cpu_seconds(server_pid) - server_cpu
    await consumer.drain()
    return len(batch) / elapsed, server_cpu / len(batch) * 1e6


async def run(smoke: bool) -> None:
    """Run every phase and print the figures."""
    mowers = 1000
    rounds = 3 if smoke else 60
    naive_count = 600 if smoke else 6000
    idle_fraction_of_day = 1 / 48 if smoke else 1.0
    server = NatsServer()
    server.start()
    url = await asyncio.to_thread(create_database, "mowdeck_bench")
    try:
        await migrate(url, discover(sql_root(), ["telemetry"]))
        bus = await Bus.connect(server.url, name="bench")
        pool = await asyncpg.create_pool(url, min_size=2, max_size=8)
        try:
            # -- naive baseline ------------------------------------------------------
            naive_rate = await naive(bus, pool, states(mowers, 10)[:naive_count])
            await pool.execute(f"TRUNCATE {TABLES}")
            # -- fingerprinted, batched ingest ---------------------------------------
            authorizer = LocalAuthorizer(InMemoryTupleStore())
            await authorizer.write(grant_tuples(ACCOUNT, "bench", "viewer"))
            settings = TelemetrySettings(
                nats_url=server.url, database_url=url, http_port=0, log_level="warning"
            )
            configure_gc(settings)  # as `mowdeck telemetry` does for its process

            def make() -> TelemetryService:
                return freezing_service(  # as `mowdeck telemetry` runs it
                    settings,
                    pool=pool,
                    authorizer=authorizer,
                    verifier=TokenVerifier(AUTH),
                    seed=False,
                    retention=False,
                )

            phase = await live(bus, server.url, make, rounds, server_pid=server.pid)
            rate, publisher_rate = phase.rate, phase.publisher_rate
            total = 1000 * rounds
            print(
                f"live: {total} states in {total / rate:.2f} s ({rate:,.0f}/s);"
                f" published at {publisher_rate:,.0f}/s (first publish to the last flush);"
                f" CPU per state: {phase.service_us:.1f} µs in the service's process,"
                f" {phase.server_us:.1f} µs in nats-server"
            )
            # -- the transport alone: delivery and acks, nothing else ----------------
            load = states(mowers, rounds)
            transport_rate, server_us = await transport(
                bus, server.url, load, server_pid=server.pid
            )
            print(
                f"transport: {transport_rate:,.0f} states/s delivered and acknowledged;"
                f" nats-server {server_us:.1f} µs of CPU per state"
            )
            # The same with the consumer filtered to telemetry.mower.* (narrower than the
            # stream's telemetry.>): why the service's consumer reads the whole stream.
            filtered_rate, filtered_us = await transport(
                bus, server.url, load, server_pid=server.pid, subject=TELEMETRY_FILTER
            )
            print(
                f"transport, filtered to {TELEMETRY_FILTER}: {filtered_rate:,.0f} states/s;"
                f" nats-server {filtered_us:.1f} µs of CPU per state"
            )
            await pool.execute(f"TRUNCATE {TABLES}")
            await fresh_stream(bus)
            await publish(bus, states(mowers, rounds))
            gc.collect()
            service = make()
            started = time.perf_counter()
            await service.start()
            await drained(bus, STATES_DURABLE)
            backlog_rate = total / (time.perf_counter() - started)
            written = {
                t: await pool.fetchval(f"SELECT count(*) FROM {t}")  # noqa: S608
                for t in ("mower_latest", "mower_history", "mower_positions")
            }
            print(f"backlog: {total} states in {total / backlog_rate:.2f} s, rows {written}")
            # -- idle day ------------------------------------------------------------
            idle = [uuid.UUID(int=10_000 + i) for i in range(4)]
            beats = int(8640 * idle_fraction_of_day)
            day = [
                MowerState(
                    mower_id=m,
                    account_id=ACCOUNT,
                    observed_at=START + timedelta(seconds=10 * r),
                    activity="docked",
                    battery=100,
                    rtk_fix="fixed",
                    position=Position(lat=52.0, lon=13.0),
                )
                for r in range(beats)
                for m in idle
            ]
            await publish(bus, day)
            await drained(bus, STATES_DURABLE)
            idle_rows = await pool.fetchval(
                "SELECT count(*) FROM mower_history WHERE mower_id = ANY($1::uuid[])", idle
            )
            per_day = idle_rows / len(idle) / idle_fraction_of_day
            # -- history query p99 ---------------------------------------------------
            http_ms, sql_ms = await query_p99(service, authorizer, pool, smoke)
            await service.stop()
        finally:
            await pool.close()
            await bus.drain()
    finally:
        server.close()
        await asyncio.to_thread(drop_database, url)
    print(
        f"naive: {naive_rate:,.0f} states/s; live: {rate:,.0f} states/s "
        f"({rate / naive_rate:.1f}x); backlog: {backlog_rate:,.0f} states/s "
        f"({backlog_rate / naive_rate:.1f}x); transport alone: {transport_rate:,.0f} states/s "
        f"(backlog ingest at {backlog_rate / transport_rate:.0%} of it)"
    )
    print(
        f"RESULT states_per_s={rate:.0f} backlog_states_per_s={backlog_rate:.0f} "
        f"publisher_states_per_s={publisher_rate:.0f} "
        f"live_service_cpu_us_per_state={phase.service_us:.1f} "
        f"live_server_cpu_us_per_state={phase.server_us:.1f} "
        f"transport_states_per_s={transport_rate:.0f} "
        f"transport_server_us_per_state={server_us:.1f} "
        f"filtered_transport_states_per_s={filtered_rate:.0f} "
        f"filtered_transport_server_us_per_state={filtered_us:.1f} "
        f"naive_states_per_s={naive_rate:.0f} "
        f"history_rows_per_idle_mower_day={per_day:.0f} history_query_p99_ms={http_ms.p99:.1f} "
        f"history_query_p50_ms={http_ms.p50:.1f} history_sql_p99_ms={sql_ms.p99:.1f} "
        f"history_sql_p50_ms={sql_ms.p50:.1f}"
    )


async def query_p99(
    service: TelemetryService, authorizer: LocalAuthorizer, pool: asyncpg.Pool, smoke: bool
) -> tuple[Quantiles, Quantiles]:
    """A 31-day history query at a 1 h step over a busy mower (one row a minute).

    Returns the quantiles over HTTP and those of its SQL statement alone.
    """
    mower = uuid.UUID(int=99_999)
    end = START + timedelta(days=31)
    await authorizer.write([Tuple(account_object(ACCOUNT), "account", mower_object(mower))])
    await pool.execute(
        "INSERT INTO mower_history (mower_id, observed_at, account_id, activity, battery,"
        " charging, rtk_fix) SELECT $1, $2::timestamptz + i * interval '1 minute', $3,"
        " 'mowing', 20 + i % 80, i % 7 = 0, 'fixed' FROM generate_series(0, 44639) i",
        mower,
        START,
        ACCOUNT,
    )
    await pool.execute(
        "INSERT INTO mower_positions (mower_id, observed_at, account_id, lat, lon, rtk_fix)"
        " SELECT $1, $2::timestamptz + i * interval '20 seconds', $3, 52 + i * 1e-7, 13,"
        " 'fixed' FROM generate_series(0, 133919) i",
        mower,
        START,
        ACCOUNT,
    )
    # A month of rows is long settled in production: autovacuum has set the visibility
    # map (index-only scans) and the statistics.
    for table in ("mower_history", "mower_positions"):
        await pool.execute(f"VACUUM ANALYZE {table}")
    token = TokenIssuer(AUTH).mint("bench", ACCOUNT)
    path = (
        f"{service.url}/v1/mowers/{mower}/history?step=1h"
        f"&from={START.isoformat()}&to={end.isoformat()}".replace("+00:00", "Z")
    )
    samples: list[float] = []
    sql_samples: list[float] = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for _ in range(20 if smoke else 200):
            began = time.perf_counter()
            async with http.get(path) as response:
                # Request sent to the last byte of the body received: the service's
                # latency. The client's own decoding of these 166 kB (1-3 ms, whichever
                # JSON library) is its own, so it is checked outside the timing.
                raw = await response.read()
            samples.append((time.perf_counter() - began) * 1000)
            body = msgspec.json.decode(raw)
            assert response.status == 200, body
            assert len(body["items"]) == 744, len(body["items"])
            # The statement alone, right after, so both see the same machine: the
            # difference is what HTTP, the token, authorization and JSON cost.
            began = time.perf_counter()
            await pool.fetch(sql.HISTORY_BINS, ACCOUNT, mower, START, end, timedelta(hours=1))
            sql_samples.append((time.perf_counter() - began) * 1000)
    return Quantiles.of(samples), Quantiles.of(sql_samples)


@dataclass(frozen=True)
class Quantiles:
    """p50 and p99 of some milliseconds."""

    p50: float
    p99: float

    @classmethod
    def of(cls, samples: list[float]) -> Quantiles:
        """The quantiles of ``samples``."""
        ordered = sorted(samples)
        return cls(
            ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        )


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    parser.add_argument("--publish", metavar="NATS_URL", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=60, help=argparse.SUPPRESS)
    parser.add_argument("--part", default="0/1", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.publish:
        part, parts = (int(n) for n in args.part.split("/"))
        asyncio.run(publisher_main(args.publish, args.rounds, part, parts))
    else:
        asyncio.run(run(args.smoke))


if __name__ == "__main__":
    main()
