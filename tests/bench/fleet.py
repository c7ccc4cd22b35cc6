"""Fleet: ``POST /v1/mowers/{id}/commands`` per second with p50/p99 latency.

Fleet runs in this process on a fresh database and its own nats-server, with the
in-process authorization evaluator over PostgreSQL; a load generator in a second process
posts commands over loopback with a fixed number of connections.

Run: python -m tests.bench.fleet [--smoke] [--duration S] [--concurrency N]
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

import aiohttp

from mowdeck.authn import AuthSettings, TokenIssuer
from mowdeck.authz import LocalAuthorizer, PostgresTupleStore, grant_tuples
from mowdeck.fleet import FleetService, FleetSettings
from mowdeck.kit.migrate import discover, migrate, sql_root
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

AUTH = AuthSettings(jwt_secret="bench-secret-bench-secret-bench-secret!")
BODIES = [
    b'{"command": {"kind": "set_blade_height", "height_mm": 40}}',
    b'{"command": {"kind": "start_mow", "duration_min": 60}}',
    b'{"command": {"kind": "return_to_dock"}}',
]


async def _load(url: str, token: str, mowers: list[str], duration: float, conns: int) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []
    errors = 0
    warmup_end = time.perf_counter() + min(1.0, duration / 4)
    end = warmup_end + duration

    async def worker(http: aiohttp.ClientSession) -> None:
        nonlocal errors
        rng = random.Random()
        while True:
            started = time.perf_counter()
            if started >= end:
                return
            path = f"/v1/mowers/{rng.choice(mowers)}/commands"
            async with http.post(path, data=rng.choice(BODIES), headers=headers) as r:
                await r.read()
                ok = r.status == 202
            done = time.perf_counter()
            if started >= warmup_end:
                latencies.append(done - started)
                errors += not ok

    connector = aiohttp.TCPConnector(limit=conns)
    async with aiohttp.ClientSession(url, connector=connector) as http:
        await asyncio.gather(*(worker(http) for _ in range(conns)))
    print(json.dumps({"latencies": latencies, "errors": errors, "duration": duration}))


async def _serve(db: str, nats_url: str, args: argparse.Namespace) -> dict[str, Any]:
    await migrate(db, discover(sql_root(), ["fleet", "authz"]))
    settings = FleetSettings(nats_url=nats_url, database_url=db, http_port=0, log_level="warning")
    service = FleetService(settings, auth_settings=AUTH, connection_kinds={"simulator"})
    await service.start()
    try:
        account, user = uuid.uuid4(), "bench-operator"
        assert service.fleet is not None
        inner = service.fleet.authorizer.inner
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
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.bench.fleet",
            "--load",
            service.url,
            "--token",
            token,
            "--duration",
            str(args.duration),
            "--concurrency",
            str(args.concurrency),
            *mowers,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"load generator failed with {proc.returncode}")
        return dict(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        await service.stop()


def main() -> None:
    """Run the benchmark (or, with ``--load``, be the load generator)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few seconds only")
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--mowers", type=int, default=100)
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
    if stats["errors"]:
        raise SystemExit(f"{stats['errors']} requests were not answered 202")
    print(f"RESULT requests_per_s={rate:.0f} p50_ms={p50:.2f} p99_ms={p99:.2f}")


if __name__ == "__main__":
    main()
