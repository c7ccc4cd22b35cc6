"""Realtime fan-out: delivered events per second, publish-to-client latency, CPU, memory.

10,000 mowers in 50 accounts (200 each) publish about 2,000 states a second: a heartbeat
every 10 s from each (1,000/s) plus 1,000 changes a second. 500 SSE clients, 10 per
account, each see their account's mowers: every state goes to 10 clients, about 20,000
deliveries a second. A tenth of the clients read ten times slower than the per-client
publish rate (a small receive buffer and a byte budget): their states must be conflated
while the others keep their latency.

Four processes share the two cores: nats-server, the service (measured: CPU from
/proc, RSS before and after the clients connect), a publisher (core publishes into the
stream, as the gateway does) and the clients (bare asyncio protocols that count event
blocks and read the publish time from the newest state of each read, so that they cost
far less than the service).

Run: python -m tests.bench.realtime [--smoke] [--duration S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import nats

from contracts.v1 import MowerListRequest, MowerRegistration, decode, encode
from contracts.v1.fleet import Connection
from contracts.v1.subjects import FLEET_MOWERS_LIST
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
from mowdeck.realtime.cli import tuned_service
from mowdeck.realtime.settings import RealtimeSettings
from tests.support.natsserver import NatsServer

AUTH = AuthSettings(jwt_secret="realtime-bench-secret-0123456789abcdef!!")
BENCH_ARGV = ["-m", "tests.bench.realtime"]
TICK = 0.01
EVENT_BYTES = 300  # about one SSE block of a state


def account(a: int) -> uuid.UUID:
    return uuid.UUID(int=(1 << 64) + a)


def mower(a: int, m: int, per_account: int) -> uuid.UUID:
    return uuid.UUID(int=(2 << 64) + a * per_account + m)


def user(a: int, k: int) -> str:
    return f"u{a}-{k}"


# -- the service process ----------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> None:
    store = InMemoryTupleStore()
    authorizer = LocalAuthorizer(store)
    tuples: list[Tuple] = []
    for a in range(args.accounts):
        for k in range(args.clients // args.accounts):
            tuples += grant_tuples(account(a), user(a, k), "viewer")
        tuples += [
            Tuple(account_object(account(a)), "account", mower_object(mower(a, m, args.per)))
            for m in range(args.per)
        ]
    await authorizer.write(tuples)
    service = tuned_service(  # as `mowdeck realtime` runs it
        RealtimeSettings(
            nats_url=args.nats,
            http_port=0,
            realtime_max_connections_per_user=10,
            realtime_authz_refresh_seconds=args.refresh,
        ),
        authorizer=authorizer,
        verifier=TokenVerifier(AUTH),
    )
    await service.start()
    print(f"URL {service.url}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await service.stop()


# -- the publisher process --------------------------------------------------------------


def _state(a: int, m: int, per: int, battery: int) -> bytes:
    at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return (
        b'{"mower_id":"%s","account_id":"%s","observed_at":"%s","activity":"mowing",'
        b'"battery":%d,"raw":{"pt":%d}}'
        % (
            str(mower(a, m, per)).encode(),
            str(account(a)).encode(),
            at.encode(),
            battery,
            time.time_ns(),
        )
    )


async def _publish(args: argparse.Namespace) -> None:
    nc = await nats.connect(args.nats)
    mowers = [(a, m) for a in range(args.accounts) for m in range(args.per)]
    subjects = [f"telemetry.mower.{mower(a, m, args.per)}" for a, m in mowers]
    per_tick = args.rate * TICK
    heartbeat_per_tick = len(mowers) / 10 * TICK  # every mower every 10 s
    change_per_tick = max(0.0, per_tick - heartbeat_per_tick)
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + args.seconds
    sent = 0
    hb_due = ch_due = 0.0
    hb_next = ch_next = 0
    tick = 0
    while loop.time() < deadline:
        hb_due += heartbeat_per_tick
        ch_due += change_per_tick
        while hb_due >= 1:
            i = hb_next % len(mowers)
            a, m = mowers[i]
            await nc.publish(subjects[i], _state(a, m, args.per, 50))
            hb_next += 1
            hb_due -= 1
            sent += 1
        while ch_due >= 1:
            i = (ch_next * 7919) % len(mowers)  # spread the changes over every mower
            a, m = mowers[i]
            await nc.publish(subjects[i], _state(a, m, args.per, ch_next % 100))
            ch_next += 1
            ch_due -= 1
            sent += 1
        tick += 1
        await nc.flush() if tick % 10 == 0 else None
        delay = start + tick * TICK - loop.time()
        await asyncio.sleep(max(0.0, delay))
    await nc.flush()
    await nc.close()
    elapsed = loop.time() - start
    print(json.dumps({"published": sent, "publish_per_s": sent / elapsed}), flush=True)


# -- the clients process ----------------------------------------------------------------


class _Reader(asyncio.Protocol):
    """One SSE stream: counts event blocks, samples publish-to-read latency."""

    def __init__(self, slow_bytes_per_s: float | None) -> None:
        self.events = 0
        self.bytes = 0
        self.latencies: list[float] = []
        self.measuring = False
        self.closed = False
        self.started = False
        self._tail = b""
        self._slow = slow_bytes_per_s
        self._budget_start = time.monotonic()
        self._budget_bytes = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        joined = self._tail + data
        count = joined.count(b"\n\n")
        self.started = True  # the response began: the snapshot is on its way
        self._tail = data[-1:]
        if self.measuring:
            self.events += count
            self.bytes += len(data)
            at = data.rfind(b'"pt":')
            if at >= 0:
                end = data.find(b"}", at)
                if end > 0:
                    with_pt = data[at + 5 : end]
                    if with_pt.isdigit():
                        self.latencies.append((time.time_ns() - int(with_pt)) / 1e6)
        if self._slow is not None and self.transport is not None:
            self._budget_bytes += len(data)
            allowed_at = self._budget_start + self._budget_bytes / self._slow
            wait = allowed_at - time.monotonic()
            if wait > 0:
                self.transport.pause_reading()
                asyncio.get_running_loop().call_later(wait, self.transport.resume_reading)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True


async def _connect(host: str, port: int, token: str, slow: float | None) -> _Reader:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if slow is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, port))
    reader = _Reader(slow)
    await loop.create_connection(lambda: reader, sock=sock)
    assert reader.transport is not None
    reader.transport.write(
        f"GET /v1/stream?types=state HTTP/1.0\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    return reader


async def _clients(args: argparse.Namespace) -> None:
    issuer = TokenIssuer(AUTH)
    parts = urlsplit(args.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    per_account = args.clients // args.accounts
    per_client_bytes = args.rate * 10 / args.clients * EVENT_BYTES
    readers: list[tuple[bool, _Reader]] = []
    for a in range(args.accounts):
        for k in range(per_account):
            slow = k == 0  # one in ten: 50 of 500
            token = issuer.mint(user(a, k), account(a))
            rate = per_client_bytes / 10 if slow else None
            readers.append((slow, await _connect(host, port, token, rate)))
    # Connected once every snapshot arrived (each connect asks the authorizer).
    while not all(r.started for _, r in readers):
        await asyncio.sleep(0.1)
    print("CONNECTED", flush=True)
    await asyncio.sleep(args.warmup)
    for _, r in readers:
        r.measuring = True
    started = time.monotonic()
    await asyncio.sleep(args.duration)
    elapsed = time.monotonic() - started
    for _, r in readers:
        r.measuring = False
    normal = [r for slow, r in readers if not slow]
    slow_ones = [r for slow, r in readers if slow]
    lat = sorted(x for r in normal for x in r.latencies)
    slow_lat = sorted(x for r in slow_ones for x in r.latencies)

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")

    print(
        json.dumps(
            {
                "elapsed": elapsed,
                "normal_events": sum(r.events for r in normal),
                "slow_events": sum(r.events for r in slow_ones),
                "normal_p50_ms": pct(lat, 0.50),
                "normal_p99_ms": pct(lat, 0.99),
                "slow_p50_ms": pct(slow_lat, 0.50),
                "closed": sum(r.closed for _, r in readers),
                "slow_bytes_per_s": statistics.mean(r.bytes for r in slow_ones) / elapsed
                if slow_ones
                else 0,
                "normal_bytes_per_s": statistics.mean(r.bytes for r in normal) / elapsed,
            }
        ),
        flush=True,
    )


# -- the conductor ----------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def _metric(http: aiohttp.ClientSession, url: str, name: str) -> float:
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def _buckets(http: aiohttp.ClientSession, url: str, name: str) -> tuple[str, str]:
    """The bucket bounds of a histogram's p50 and p99 (over the whole run)."""
    async with http.get(f"{url}/metrics") as response:
        text = await response.text()
    buckets = []
    for line in text.splitlines():
        if line.startswith(name):
            bound = line.split('le="')[1].split('"')[0]
            buckets.append((bound, float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1] if buckets else 0
    p50 = next((b for b, c in buckets if c >= total * 0.5), "?")
    p99 = next((b for b, c in buckets if c >= total * 0.99), "?")
    return p50, p99


def _child(mode: str, args: argparse.Namespace, **extra: Any) -> subprocess.Popen[str]:
    argv = [sys.executable, *BENCH_ARGV, "--mode", mode]
    for key, value in {**vars(args), **extra}.items():
        if key in ("mode", "smoke") or value is None:
            continue
        argv += [f"--{key}", str(value)]
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )


async def _line(proc: subprocess.Popen[str], prefix: str = "") -> str:
    """The child's next line starting with ``prefix`` (log lines go past)."""
    assert proc.stdout is not None
    while True:
        line = await asyncio.to_thread(proc.stdout.readline)
        if not line:
            raise RuntimeError(f"a benchmark process ended early (exit {proc.poll()})")
        if line.startswith(prefix):
            return line.strip()


async def _conduct(args: argparse.Namespace) -> None:
    nats_server = NatsServer()
    nats_server.start()
    try:
        args.nats = nats_server.url
        bus = await Bus.connect(args.nats, name="bench")
        await apply_all(bus)  # the admin step (mowdeck streams)
        # Every mower has a state in the stream before the service starts: its snapshot
        # cache (the last message per subject) then holds 10,000 states.
        nc = bus.nc
        for a in range(args.accounts):
            for m in range(args.per):
                await nc.publish(
                    f"telemetry.mower.{mower(a, m, args.per)}", _state(a, m, args.per, 99)
                )
        # Fleet's list of mowers, which the service asks at start for their accounts.
        listed = [
            MowerRegistration(
                mower_id=mower(a, m, args.per),
                account_id=account(a),
                name=f"m{m}",
                connection=Connection(kind="simulator"),
            )
            for a in range(args.accounts)
            for m in range(args.per)
        ]

        async def answer(msg: Any) -> None:
            await msg.respond(encode(decode(msg.data, MowerListRequest).answer(listed)))

        await nc.subscribe(FLEET_MOWERS_LIST, cb=answer)
        await nc.flush()
        server = _child("serve", args)
        url = (await _line(server, "URL ")).removeprefix("URL ")
        args.url = url
        seconds = args.warmup + args.duration + 20
        publisher = _child("publish", args, seconds=seconds)
        # The traffic alone (frames in flight, the latest states replaced) costs memory
        # too: the baseline is taken while it flows, before any client connects.
        await asyncio.sleep(3.0)
        rss_before = _rss_kb(server.pid)
        clients = _child("clients", args)
        await _line(clients, "CONNECTED")
        async with aiohttp.ClientSession() as http:
            await asyncio.sleep(args.warmup)
            others = {"clients": clients.pid, "publisher": publisher.pid, "nats": nats_server.pid}
            others0 = {k: _cpu_seconds(v) for k, v in others.items()}
            cpu0, t0 = _cpu_seconds(server.pid), time.monotonic()
            delivered0 = await _metric(http, url, "mowdeck_realtime_events_delivered_total")
            conflated0 = await _metric(http, url, "mowdeck_realtime_events_conflated_total")
            await asyncio.sleep(args.duration)
            cpu1, t1 = _cpu_seconds(server.pid), time.monotonic()
            delivered1 = await _metric(http, url, "mowdeck_realtime_events_delivered_total")
            conflated1 = await _metric(http, url, "mowdeck_realtime_events_conflated_total")
            others1 = {k: _cpu_seconds(v) for k, v in others.items()}
            slow_closes = await _metric(http, url, "mowdeck_realtime_slow_client_closes_total")
            fanout = await _buckets(http, url, "mowdeck_realtime_fanout_latency_seconds_bucket")
            rss_after = _rss_kb(server.pid)
        seen = json.loads(await _line(clients, "{"))
        publisher.terminate()
        assert server.stdin is not None
        server.stdin.write("\n")
        server.stdin.flush()
        await asyncio.to_thread(server.wait, 30)
        clients.wait(10)
        await bus.drain()
    finally:
        nats_server.close()

    elapsed = t1 - t0
    delivered = delivered1 - delivered0
    per_s = delivered / elapsed
    cpu_ms_per_1000 = (cpu1 - cpu0) * 1000 / max(delivered, 1) * 1000
    kb_per_conn = (rss_after - rss_before) / args.clients
    client_rate = (seen["normal_events"] + seen["slow_events"]) / seen["elapsed"]
    print(f"service: {per_s:,.0f} delivered/s, CPU {(cpu1 - cpu0) / elapsed:.0%} of a core")
    print(f"clients counted {client_rate:,.0f} events/s; closed {seen['closed']}")
    print(
        f"normal clients p50 {seen['normal_p50_ms']:.1f} ms p99 {seen['normal_p99_ms']:.1f} ms; "
        f"slow clients p50 {seen['slow_p50_ms']:.0f} ms"
    )
    print(
        f"bytes/s per client: normal {seen['normal_bytes_per_s']:,.0f}, "
        f"slow {seen['slow_bytes_per_s']:,.0f}"
    )
    print(
        f"conflated {(conflated1 - conflated0) / elapsed:,.0f}/s; slow-client closes "
        f"{slow_closes:.0f}"
    )
    used = ", ".join(f"{k} {(others1[k] - others0[k]) / elapsed:.0%}" for k in others)
    print(f"CPU of the others: {used}")
    print(f"service fan-out (bus to write) p50 {fanout[0]} s, p99 {fanout[1]} s")
    print(f"RSS {rss_before / 1024:.0f} MB before clients, {rss_after / 1024:.0f} MB after")
    print(
        f"RESULT delivered_per_s={per_s:.0f} client_p99_ms={seen['normal_p99_ms']:.1f} "
        f"kb_per_connection={kb_per_conn:.1f} cpu_ms_per_1000={cpu_ms_per_1000:.1f}"
    )


def main() -> None:
    """Run the benchmark (or one of its processes)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a small, short run")
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--per", type=int, default=200, help="mowers per account")
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--rate", type=int, default=2000, help="states per second in all")
    parser.add_argument("--refresh", type=float, default=30.0, help="authz refresh seconds")
    parser.add_argument("--mode", default="conduct", help=argparse.SUPPRESS)
    parser.add_argument("--nats", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke and args.mode == "conduct":
        args.duration, args.warmup = 3.0, 2.0
        args.accounts, args.per, args.clients, args.rate = 5, 20, 50, 200
    runner = {"conduct": _conduct, "serve": _serve, "publish": _publish, "clients": _clients}
    asyncio.run(runner[args.mode](args))


if __name__ == "__main__":
    main()
