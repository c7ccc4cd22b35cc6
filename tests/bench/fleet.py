"""Fleet: ``POST /v1/mowers/{id}/commands`` per second with p50/p99 latency.

Fleet runs in this process on a fresh database and its own nats-server, with the
in-process authorization evaluator over PostgreSQL; a load generator in a second process
posts commands over loopback on a fixed number of keep-alive connections.

The generator is a bare asyncio protocol with pre-built requests (not aiohttp's client):
it must cost far less CPU than the server it measures, because both share two cores. The
CPU line reports how much each process used while measuring.

The rate limits are on, set far above what one token sends here, so every command pays
for its two takes (the user's in memory, the account's in PostgreSQL); ``--no-limits``
turns them off (rate 0), to compare.

Run: python -m tests.bench.fleet [--smoke] [--duration S] [--concurrency N] [--mowers N]
[--no-limits]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from mowdeck.authn import AuthSettings, TokenIssuer
from mowdeck.authz import LocalAuthorizer, PostgresTupleStore, grant_tuples
from mowdeck.commands.streams import apply_all
from mowdeck.devices.kinds import SIMULATOR, ConnectionKinds
from mowdeck.fleet import FleetService, FleetSettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.migrate import discover, migrate, sql_root
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

AUTH = AuthSettings(jwt_secret="bench-secret-bench-secret-bench-secret!")
BODIES = [
    b'{"command": {"kind": "set_blade_height", "height_mm": 40}}',
    b'{"command": {"kind": "start_mow", "duration_min": 60}}',
    b'{"command": {"kind": "return_to_dock"}}',
]
WARM = "warm"


def _requests(host: str, token: str, mowers: list[str]) -> list[bytes]:
    """Every request the generator sends, encoded once."""
    out = []
    for mower in mowers:
        for body in BODIES:
            head = (
                f"POST /v1/mowers/{mower}/commands HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            out.append(head.encode() + body)
    return out


class _Client(asyncio.Protocol):
    """One keep-alive connection: send a request, read the whole answer, send the next."""

    def __init__(self, run: _Run) -> None:
        self.run = run
        self.buf = bytearray()
        self.started = 0.0
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.send()

    def send(self) -> None:
        assert self.transport is not None
        self.started = time.perf_counter()
        if self.started >= self.run.end:
            self.transport.close()
            return
        self.transport.write(self.run.rng.choice(self.run.requests))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = bytes(self.buf[:head_end]).lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            raise RuntimeError("the benchmark expects Content-Length in every answer")
        eol = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : eol if eol >= 0 else len(head)])
        total = head_end + 4 + length
        if len(self.buf) < total:
            return
        status = int(head[9:12])
        del self.buf[:total]
        self.run.done(self.started, status)
        self.send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class _Run:
    def __init__(self, requests: list[bytes], duration: float) -> None:
        self.requests = requests
        self.rng = random.Random()
        self.latencies: list[float] = []
        self.errors = 0
        now = time.perf_counter()
        self.warmup_end = now + min(1.0, duration / 4)
        self.end = self.warmup_end + duration
        self.cpu_started = 0.0

    def done(self, started: float, status: int) -> None:
        if started >= self.warmup_end:
            if not self.latencies:
                self.cpu_started = time.process_time()
                print(WARM, flush=True)  # the server starts measuring its CPU now
            self.latencies.append(time.perf_counter() - started)
            self.errors += status != 202


async def _load(url: str, token: str, mowers: list[str], duration: float, conns: int) -> None:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    run = _Run(_requests(f"{host}:{port}", token, mowers), duration)
    loop = asyncio.get_running_loop()
    clients = [
        (await loop.create_connection(lambda: _Client(run), host, port))[1] for _ in range(conns)
    ]
    await asyncio.gather(*(c.closed for c in clients))
    cpu = time.process_time() - run.cpu_started
    print(
        json.dumps(
            {
                "latencies": run.latencies,
                "errors": run.errors,
                "duration": duration,
                "load_cpu": cpu / duration,
            }
        )
    )


async def _generate(url: str, token: str, mowers: list[str], args: argparse.Namespace) -> Any:
    """Run the generator process; returns its report and Fleet's CPU share meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bench.fleet",
        "--load",
        url,
        "--token",
        token,
        "--duration",
        str(args.duration),
        "--concurrency",
        str(args.concurrency),
        *mowers,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 30,
    )
    assert proc.stdout is not None
    cpu0 = wall0 = 0.0
    last = b""
    async for line in proc.stdout:
        if line.strip() == WARM.encode():
            cpu0, wall0 = time.process_time(), time.perf_counter()
        else:
            last = line
    cpu1, wall1 = time.process_time(), time.perf_counter()
    if await proc.wait() != 0:
        raise RuntimeError(f"load generator failed with {proc.returncode}")
    report = dict(json.loads(last))
    report["fleet_cpu"] = (cpu1 - cpu0) / (wall1 - wall0) if wall0 else 0.0
    return report


async def _serve(db: str, nats_url: str, args: argparse.Namespace) -> dict[str, Any]:
    await migrate(db, discover(sql_root(), ["fleet", "authz"]))
    admin = await Bus.connect(nats_url, name="bench-streams")
    await apply_all(admin)  # the admin step (mowdeck streams): Fleet only waits for it
    await admin.drain()
    rate = 0.0 if args.no_limits else 1_000_000.0
    settings = FleetSettings(
        nats_url=nats_url,
        database_url=db,
        http_port=0,
        log_level="warning",
        fleet_commands_per_user_rate=rate,
        fleet_commands_per_user_burst=10_000_000,
        fleet_commands_per_account_rate=rate,
        fleet_commands_per_account_burst=10_000_000,
    )
    service = FleetService(
        settings, auth_settings=AUTH, connection_kinds=ConnectionKinds([SIMULATOR])
    )
    await service.start()
    try:
        account, user = uuid.uuid4(), "bench-operator"
        inner = service.parts.fleet.authorizer.inner
        assert isinstance(inner, LocalAuthorizer)
        assert isinstance(inner.store, PostgresTupleStore)
        await inner.write(grant_tuples(account, user, "admin"))
        token = TokenIssuer(AUTH).mint(user, account, ttl_s=3600)
        mowers = []
        async with aiohttp.ClientSession(service.url) as http:
            for i in range(args.mowers):
                async with http.post(
                    "/v1/mowers",
                    json={"name": f"bench-{i}", "connection": {"kind": "simulator"}},
                    headers={"Authorization": f"Bearer {token}"},
                ) as r:
                    assert r.status == 201, await r.text()
                    mowers.append((await r.json())["mower_id"])
        return dict(await _generate(service.url, token, mowers, args))
    finally:
        await service.stop()


def main() -> None:
    """Run the benchmark (or, with ``--load``, be the load generator)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few seconds only")
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--mowers", type=int, default=100)
    parser.add_argument("--no-limits", action="store_true", help="rate limits off")
    parser.add_argument("--load", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("ids", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        asyncio.run(_load(args.load, args.token, args.ids, args.duration, args.concurrency))
        return
    if args.duration is None:
        args.duration = 2.0 if args.smoke else 15.0
    if args.smoke:
        args.mowers = min(args.mowers, 10)
    nats = NatsServer()
    nats.start()
    db = create_database("mowdeck_bench")
    try:
        stats = asyncio.run(_serve(db, nats.url, args))
    finally:
        drop_database(db)
        nats.close()
    latencies = sorted(stats["latencies"])
    if not latencies:
        raise SystemExit("no requests completed")
    rate = len(latencies) / stats["duration"]
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(
        f"fleet commands: {len(latencies)} requests in {stats['duration']:.0f} s over "
        f"{args.concurrency} connections, {stats['errors']} not 202"
    )
    print(
        f"CPU while measuring (1.0 = one core): fleet={stats['fleet_cpu']:.2f} "
        f"load_generator={stats['load_cpu']:.2f}"
    )
    if stats["errors"]:
        raise SystemExit(f"{stats['errors']} requests were not answered 202")
    print(f"RESULT requests_per_s={rate:.0f} p50_ms={p50:.2f} p99_ms={p99:.2f}")


if __name__ == "__main__":
    main()
