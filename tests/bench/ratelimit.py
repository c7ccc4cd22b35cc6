"""Shared rate-limit stores: PostgreSQL against a JetStream key-value bucket, per take.

Run: python -m tests.bench.ratelimit [--smoke] [--seconds S] [--takers N] [--rounds R]

Each store is driven by ``--takers`` concurrent tasks in this process, each taking a token
after the previous one answered, for ``--seconds``; a limit so high that every take
passes, so every take writes. Three workloads: one key (every taker on the same bucket:
an account's commands from many requests at once), many keys (each take on one of
10,000 keys) and alone (one taker on many keys: a take's own latency, nothing queued
before it). The figures are takes per second and the p50/p99 latency of one take.

- ``pg``: ``mowdeck.kit.ratelimit.PostgresLimiter`` on an UNLOGGED table (as Fleet's
  migration makes it), one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` per take;
  ``pg_logged``: the same on an ordinary table (every take writes WAL and waits for its
  flush at commit).
- ``kv``: a JetStream key-value bucket (memory storage, history 1, an age limit for
  idle keys): get, compute with ``kit.ratelimit.take``, then ``update`` with the revision
  read (``create`` for a new key); a conflict (another taker wrote in between) reads and
  computes again. ``kv_*_retries`` counts them.
- ``pg_batched`` and ``kv_batched``: the same stores behind ``kit.ratelimit.BatchingLimiter``
  (what Fleet runs): the takes of one key that arrive while its write is in flight are
  written together, ``take_many`` in one statement, or in one get and update.

Stores alternate within a round and rounds repeat, so the machine's drift falls on all
alike; the RESULT line gives each figure's median over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import nats
from nats.js import api
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from mowdeck.kit.ratelimit import (
    TABLE_SQL,
    BatchingLimiter,
    Bucket,
    Limit,
    PostgresLimiter,
    Verdict,
    refused,
    take_many,
)
from tests.support.natsserver import NatsServer
from tests.support.postgres import create_database, drop_database

LIMIT = Limit(rate=1e9, burst=1e9)
KEYS = 10_000
BUCKET = "bench-ratelimit"


class _KvBucket(msgspec.Struct, array_like=True, frozen=True):
    tokens: float
    at: float


class KvLimiter:
    """Buckets in a JetStream key-value bucket: read, compute, write with the revision."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv
        self.retries = 0

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        """One token from ``key``."""
        tokens, granted = await self.take_many(key, limit, now, 1)
        return Verdict(allowed=True) if granted else refused(tokens, limit)

    async def take_many(self, key: str, limit: Limit, now: float, count: int) -> tuple[float, int]:
        """``count`` takes of ``key``, retried while another writer got in between."""
        while True:
            try:
                entry = await self.kv.get(key)
            except KeyNotFoundError:
                entry = None
            found = None
            if entry is not None and entry.value:
                stored = msgspec.msgpack.decode(entry.value, type=_KvBucket)
                found = Bucket(stored.tokens, stored.at)
            bucket, granted = take_many(found, limit, now, count)
            value = msgspec.msgpack.encode(_KvBucket(bucket.tokens, bucket.at))
            try:
                if entry is None:
                    await self.kv.create(key, value)
                else:
                    await self.kv.update(key, value, last=entry.revision)
            except KeyWrongLastSequenceError:
                self.retries += 1
                continue
            return bucket.tokens, granted

    async def expire(self, now: float) -> int:
        """The bucket's age limit expires idle keys."""
        return 0


@dataclass(frozen=True)
class Figures:
    """One measurement."""

    takes_per_s: float
    p50_ms: float
    p99_ms: float


Take = Callable[[str, Limit, float], Awaitable[Verdict]]


async def measure(take_one: Take, keys: list[str], takers: int, seconds: float) -> Figures:
    """``takers`` tasks taking tokens back to back on random ``keys`` for ``seconds``."""
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def taker(seed: int) -> None:
        rng = random.Random(seed)
        while True:
            started = time.perf_counter()
            if started >= end:
                return
            verdict = await take_one(rng.choice(keys), LIMIT, time.time())
            latencies.append(time.perf_counter() - started)
            assert verdict.allowed

    started = time.perf_counter()
    await asyncio.gather(*(taker(n) for n in range(takers)))
    wall = time.perf_counter() - started
    latencies.sort()
    return Figures(
        takes_per_s=len(latencies) / wall,
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    )


async def _stores(db: str, nats_url: str, takers: int) -> tuple[dict[str, Take], KvLimiter, Any]:
    pool = await asyncpg.create_pool(db, min_size=takers, max_size=takers)
    await pool.execute(TABLE_SQL.format(table="bench_unlogged"))
    await pool.execute(TABLE_SQL.format(table="bench_logged").replace("UNLOGGED ", ""))
    nc = await nats.connect(nats_url)
    kv = await nc.jetstream().create_key_value(
        api.KeyValueConfig(bucket=BUCKET, history=1, ttl=3600, storage=api.StorageType.MEMORY)
    )
    kv_limiter = KvLimiter(kv)
    pg = PostgresLimiter(pool, "bench_unlogged", connections=takers)
    stores: dict[str, Take] = {
        "pg": pg.take,
        "pg_logged": PostgresLimiter(pool, "bench_logged", connections=takers).take,
        "kv": kv_limiter.take,
        "pg_batched": BatchingLimiter(pg).take,
        "kv_batched": BatchingLimiter(kv_limiter).take,
    }

    async def close() -> None:
        await nc.close()
        await pool.close()

    return stores, kv_limiter, close


async def run(db: str, nats_url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Every store on every workload, ``args.rounds`` times; every figure of every round."""
    stores, kv_limiter, close = await _stores(db, nats_url, args.takers)
    many = [f"user.{n}" for n in range(KEYS)]
    # (keys, takers): one key under contention, many keys, and one taker alone (a take's
    # own latency, with nothing queued before it).
    workloads = {
        "one_key": (["account.one"], args.takers),
        "many_keys": (many, args.takers),
        "alone": (many, 1),
    }
    seen: dict[str, list[float]] = {}
    try:
        for round_ in range(args.rounds):
            # Each round starts with another store, so none is always measured first.
            names = list(stores)
            names = names[round_ % len(names) :] + names[: round_ % len(names)]
            for workload, (keys, takers) in workloads.items():
                for name in names:
                    retries = kv_limiter.retries
                    figures = await measure(stores[name], keys, takers, args.seconds)
                    tag = f"{name}_{workload}"
                    print(
                        f"round {round_ + 1} {tag}: {figures.takes_per_s:,.0f} takes/s, "
                        f"p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms"
                        + (
                            f", {kv_limiter.retries - retries} retries"
                            if name.startswith("kv")
                            else ""
                        ),
                        flush=True,
                    )
                    seen.setdefault(f"{tag}_takes_per_s", []).append(figures.takes_per_s)
                    seen.setdefault(f"{tag}_p50_ms", []).append(figures.p50_ms)
                    seen.setdefault(f"{tag}_p99_ms", []).append(figures.p99_ms)
                    if name.startswith("kv"):
                        seen.setdefault(f"{tag}_retries", []).append(kv_limiter.retries - retries)
    finally:
        await close()
    return seen


def main() -> None:
    """Measure and print the RESULT line (medians over the rounds)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few seconds only")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--takers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    if args.seconds is None:
        args.seconds = 0.2 if args.smoke else 3.0
    if args.rounds is None:
        args.rounds = 1 if args.smoke else 3
    server = NatsServer()
    server.start()
    db = create_database("mowdeck_bench")
    try:
        seen = asyncio.run(run(db, server.url, args))
    finally:
        drop_database(db)
        server.close()
    medians = {key: statistics.median(values) for key, values in seen.items()}
    print(
        "RESULT "
        + " ".join(
            f"{key}={value:.2f}" if key.endswith("_ms") else f"{key}={value:.0f}"
            for key, value in medians.items()
        )
    )


if __name__ == "__main__":
    main()
