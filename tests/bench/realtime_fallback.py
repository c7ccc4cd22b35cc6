"""Realtime's fallback for silent mowers: one snapshot's latest states through each adapter.

A stream's snapshot asks the ``LatestStates`` port for the mowers the TELEMETRY stream no
longer holds, and waits for the answer before it is sent. Two ways can answer:
``PostgresLatestStates`` (Telemetry's ``mower_latest`` table, read with Realtime's own
statement, only the mowers asked for), Realtime's adapter, and Telemetry's
``GET /v1/states`` with the caller's token (Telemetry verifies it, asks the authorizer and
answers the whole account's states, narrowed here to the mowers asked for), which was an
adapter of Realtime's until these figures (``TelemetryApi`` below is that adapter, kept
so that the comparison can be made again).

Each scenario asks ``--repeat`` times in a row, after a warm-up, for the fallback of
``silent`` mowers in an account of ``account`` mowers whose rows Telemetry's own store
wrote. Per snapshot: latency p50 and p99, and CPU in milliseconds of Realtime's process,
of Telemetry's (its API runs in a process of its own, as deployed, with the local
authorizer over PostgreSQL tuples, compose's ``MOWDECK_AUTHZ=local``) and of the
PostgreSQL backends of the database, read from /proc.

Run: python -m tests.bench.realtime_fallback [--smoke] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import asyncpg
import msgspec
from prometheus_client import CollectorRegistry

from contracts.v1 import MowerState, Position
from mowdeck.authn import AuthSettings, TokenIssuer, TokenVerifier
from mowdeck.authz import LocalAuthorizer, PostgresTupleStore, grant_tuples
from mowdeck.kit.http import Readiness
from mowdeck.kit.http_server import HttpServer
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.pg import session_settings
from mowdeck.kit.ports import free_port
from mowdeck.realtime.stale import LatestStates, PostgresLatestStates
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import WriteBatch
from mowdeck.telemetry.postgres import PostgresTelemetryStore
from mowdeck.telemetry.routes import QueryDeps, create_app
from mowdeck.telemetry.settings import TelemetrySettings
from tests.support.postgres import create_database, drop_database
from tests.unit.telemetry.store_contract import memory_of

AUTH = AuthSettings(jwt_secret="realtime-fallback-bench-secret-0123456789!")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000a1")
USER = "viewer"
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
# Realtime's pool, as its service opens it (realtime/service.py).
POOL = {"min_size": 1, "max_size": 4, "server_settings": session_settings(10_000)}


def mower(n: int) -> uuid.UUID:
    return uuid.UUID(int=(3 << 64) + n)


def state(n: int) -> MowerState:
    """A silent mower's last state, as a docked mower reports it."""
    return MowerState(
        mower_id=mower(n),
        account_id=ACCOUNT,
        observed_at=NOW - timedelta(hours=2, seconds=n),
        activity="charging",
        battery=40 + n % 60,
        charging=True,
        rtk_fix="fixed",
        rtk_source="base",
        connection="wifi",
        blade_height_mm=40,
        speed_mps=0.0,
        position=Position(lat=52.0 + n * 1e-5, lon=13.0 + n * 1e-5, heading_deg=90.0),
        raw={"firmware": "1.4.2", "board_temp_c": 31},
    )


class _Items(msgspec.Struct):
    items: list[MowerState]


class TelemetryApi(LatestStates):
    """Telemetry's ``/v1/states``, asked with the caller's bearer token."""

    def __init__(self, base_url: str, session: aiohttp.ClientSession, token: str) -> None:
        self._url = base_url.rstrip("/") + "/v1/states"
        self._session = session
        self._token = token  # the stream's caller's, as Realtime forwarded it
        self._decoder = msgspec.json.Decoder(_Items)

    async def latest(
        self, mowers: Collection[uuid.UUID], *, account_id: uuid.UUID
    ) -> list[MowerState]:
        """The account's states from Telemetry, narrowed to ``mowers``."""
        headers = {"Authorization": f"Bearer {self._token}"}
        async with self._session.get(self._url, headers=headers) as response:
            assert response.status == 200, response.status
            items = self._decoder.decode(await response.read()).items
        wanted = set(mowers)
        return [s for s in items if s.mower_id in wanted]


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- Telemetry's API, in its own process ------------------------------------------------


async def _serve(dsn: str, port: int) -> None:
    pool = await asyncpg.create_pool(
        dsn, min_size=1, max_size=10, server_settings=session_settings(10_000)
    )
    registry = CollectorRegistry()
    readiness = Readiness()
    settings = TelemetrySettings(database_url=dsn)
    deps = QueryDeps(
        PostgresTelemetryStore(pool, dsn),
        LocalAuthorizer(PostgresTupleStore(pool)),
        settings,
        TelemetryMetrics(registry),
    )
    server = HttpServer(
        create_app(deps, TokenVerifier(AUTH), readiness, registry), "127.0.0.1", port
    )
    await server.start()
    readiness.set_ready()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()
        await pool.close()


# -- the measuring process --------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """One scenario through one adapter, per snapshot."""

    p50_ms: float
    p99_ms: float
    realtime_cpu_ms: float
    telemetry_cpu_ms: float
    postgres_cpu_ms: float


async def _backends(conn: asyncpg.Connection) -> list[int]:
    rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
    return [r["pid"] for r in rows]


async def _measure(
    states: LatestStates,
    silent: list[uuid.UUID],
    *,
    repeat: int,
    admin: asyncpg.Connection,
    server: int | None,
) -> Figures:
    for _ in range(max(3, repeat // 10)):  # warm-up: pools, connections, caches
        assert len(await states.latest(silent, account_id=ACCOUNT)) == len(silent)
    backends = await _backends(admin)
    pg_before = {pid: cpu_seconds(pid) for pid in backends}
    tele_before = cpu_seconds(server) if server else 0.0
    own_before = time.process_time()
    latencies: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        found = await states.latest(silent, account_id=ACCOUNT)
        latencies.append(time.perf_counter() - started)
        assert len(found) == len(silent)
    own = time.process_time() - own_before
    tele = (cpu_seconds(server) - tele_before) if server else 0.0
    pg = sum(
        cpu_seconds(pid) - pg_before.get(pid, 0.0)
        for pid in set(backends) | set(await _backends(admin))
    )
    latencies.sort()
    return Figures(
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
        realtime_cpu_ms=own / repeat * 1000,
        telemetry_cpu_ms=tele / repeat * 1000,
        postgres_cpu_ms=pg / repeat * 1000,
    )


async def _write_rows(dsn: str, account: int) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    try:
        store = PostgresTelemetryStore(pool, dsn)
        rows = [state(n) for n in range(account)]
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            batch = WriteBatch(latest=[(s, memory_of(s)) for s in chunk])
            async with store.state_writer() as tx:
                await tx.lock(sorted(s.mower_id for s in chunk))
                await tx.write(batch)
        tuples = PostgresTupleStore(pool)
        await tuples.write(grant_tuples(ACCOUNT, USER, "viewer"))
    finally:
        await pool.close()


async def _run(args: argparse.Namespace) -> None:
    scenarios = [(20, 50)] if args.smoke else [(1000, 1000), (20, 1000), (20, 20)]
    repeat = args.repeat or (10 if args.smoke else 200)
    token = TokenIssuer(AUTH).mint(USER, ACCOUNT)
    rows: list[tuple[str, int, int, Figures]] = []
    for silent_count, account in scenarios:
        dsn = await asyncio.to_thread(create_database, "mowdeck_bench_fallback")
        port = free_port()
        server: subprocess.Popen[bytes] | None = None
        try:
            await migrate(dsn, discover(sql_root(), ["telemetry", "authz"]))
            await _write_rows(dsn, account)
            server = subprocess.Popen(  # noqa: ASYNC220 - started once, before the measurement
                [
                    sys.executable,
                    "-m",
                    "tests.bench.realtime_fallback",
                    "--serve",
                    dsn,
                    "--port",
                    str(port),
                ]
            )
            base = f"http://127.0.0.1:{port}"
            silent = [mower(n) for n in range(silent_count)]
            admin = await asyncpg.connect(dsn)
            pool = await asyncpg.create_pool(dsn, **POOL)
            try:
                async with aiohttp.ClientSession() as http:
                    await _ready(http, base)
                    adapters: list[tuple[str, LatestStates, int | None]] = [
                        ("postgres", PostgresLatestStates(pool), None),
                        ("api", TelemetryApi(base, http, token), server.pid),
                    ]
                    for name, states, pid in adapters:
                        figures = await _measure(
                            states,
                            silent,
                            repeat=repeat,
                            admin=admin,
                            server=pid,
                        )
                        rows.append((name, silent_count, account, figures))
            finally:
                await pool.close()
                await admin.close()
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)
            await asyncio.to_thread(drop_database, dsn)
    print(f"{repeat} snapshots per row, one after another; per snapshot:")
    print(
        "adapter   silent  account   p50 ms   p99 ms   CPU ms: realtime  telemetry  postgres  total"
    )
    for name, silent_count, account, f in rows:
        total = f.realtime_cpu_ms + f.telemetry_cpu_ms + f.postgres_cpu_ms
        print(
            f"{name:<9} {silent_count:>6} {account:>8} {f.p50_ms:>8.2f} {f.p99_ms:>8.2f}"
            f" {f.realtime_cpu_ms:>17.2f} {f.telemetry_cpu_ms:>10.2f} {f.postgres_cpu_ms:>9.2f}"
            f" {total:>6.2f}"
        )
    result = " ".join(
        f"{name}_{silent}of{account}_p50_ms={f.p50_ms:.2f}"
        f" {name}_{silent}of{account}_p99_ms={f.p99_ms:.2f}"
        f" {name}_{silent}of{account}_cpu_ms="
        f"{f.realtime_cpu_ms + f.telemetry_cpu_ms + f.postgres_cpu_ms:.2f}"
        for name, silent, account, f in rows
    )
    print(f"RESULT {result}")


async def _ready(http: aiohttp.ClientSession, base: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            async with http.get(f"{base}/healthz") as r:
                if r.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("telemetry's API did not start")
        await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one small scenario, a few snapshots")
    parser.add_argument("--repeat", type=int, default=0, help="snapshots per row")
    parser.add_argument("--serve", metavar="DSN", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.port))
    else:
        asyncio.run(_run(args))


if __name__ == "__main__":
    main()
