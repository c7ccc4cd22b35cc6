"""CPU per Web Push POST in the sending process: aiohttp (as shipped, lean) against PushClient.

Run: python -m tests.bench.push_http_cpu [--posts 4000] [--rounds 5] [--profile CLIENT]

The local push service (``tests.support.webpush_receiver``) runs in its own process, so
``getrusage(RUSAGE_SELF)`` counts only the sender. Every client sends the same
pre-encrypted push (one JWT, real aes128gcm) with 64 in flight; the clients take turns
in every round, so load from other processes on the machine falls on all of them alike.
Wall-clock rates are not printed: CPU time is what tells the clients apart.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import resource
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from py_vapid import Vapid02

from mowdeck.notifications.delivery.channels import ChannelSettings, open_channel_session
from mowdeck.notifications.delivery.channels.ece import encrypt_push, subscription_keys
from mowdeck.notifications.delivery.channels.pushhttp import PushClient, parse_push_url
from mowdeck.notifications.delivery.channels.vapid import VapidSigner
from mowdeck.notifications.delivery.targets import TargetPolicy
from tests.bench.push_work import start_receiver

SETTINGS = ChannelSettings(
    notifications_push_hosts=["127.0.0.1"], notifications_insecure_hosts=["127.0.0.1"]
)
Post = Callable[[], Awaitable[int]]


def lean_session() -> aiohttp.ClientSession:
    """The shipped session with every cheap option: no cookies, no auto headers."""
    connector = aiohttp.TCPConnector(limit=100, ttl_dns_cache=10, enable_cleanup_closed=False)
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
        raise_for_status=False,
        timeout=aiohttp.ClientTimeout(total=10),
    )


async def measure(post: Post, posts: int, in_flight: int = 64) -> float:
    """CPU µs per POST of ``posts`` POSTs with ``in_flight`` at a time (all must be 201)."""
    gate = asyncio.Semaphore(in_flight)
    bad = 0

    async def one() -> None:
        nonlocal bad
        async with gate:
            if await post() != 201:
                bad += 1

    start = resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.gather(*(one() for _ in range(posts)))
    end = resource.getrusage(resource.RUSAGE_SELF)
    if bad:
        raise RuntimeError(f"{bad} POSTs were not answered 201")
    cpu = end.ru_utime - start.ru_utime + end.ru_stime - start.ru_stime
    return cpu / posts * 1e6


async def run(args: argparse.Namespace, info: dict[str, Any]) -> None:
    sub = info["subscriptions"][0]
    endpoint = sub["endpoint"]
    vapid = Vapid02()
    vapid.generate_keys()
    audience = endpoint.split("/push/")[0]
    headers = {
        "TTL": "3600",
        "Urgency": "normal",
        "Topic": "bench",
        "Content-Encoding": "aes128gcm",
        "Content-Type": "application/octet-stream",
        "Authorization": VapidSigner(vapid, "mailto:bench@mowdeck.example").authorization(audience),
    }
    keys = subscription_keys(sub["keys"]["p256dh"], sub["keys"]["auth"])
    body = encrypt_push(keys, b'{"title": "Mower 12: battery low"}')
    shipped, lean = open_channel_session(SETTINGS), lean_session()
    client = PushClient(TargetPolicy.from_settings(SETTINGS))
    url = parse_push_url(endpoint)

    async def via_session(session: aiohttp.ClientSession) -> int:
        async with session.post(
            endpoint, data=body, headers=headers, allow_redirects=False
        ) as response:
            await response.read()
            return response.status

    async def via_client() -> int:
        return (await client.post(url, body, headers, 10.0)).status

    clients: dict[str, Post] = {
        "aiohttp_shipped": lambda: via_session(shipped),
        "aiohttp_lean": lambda: via_session(lean),
        "pushclient": via_client,
    }
    for post in clients.values():  # warm up: connections, caches
        await measure(post, 256)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        await measure(clients[args.profile], args.posts)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    figures: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(args.rounds):
        for name, post in clients.items():
            figures[name].append(await measure(post, args.posts))
    await shipped.close()
    await lean.close()
    await client.close()
    for name, values in figures.items():
        shown = " ".join(f"{v:.0f}" for v in values)
        print(f"{name}: median {statistics.median(values):.0f} µs CPU per POST ({shown})")
    base = statistics.median(figures["aiohttp_shipped"])
    print(
        "RESULT "
        + " ".join(f"{n}_cpu_us={statistics.median(v):.0f}" for n, v in figures.items())
        + f" pushclient_saving_us={base - statistics.median(figures['pushclient']):.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--posts", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", choices=["aiohttp_shipped", "aiohttp_lean", "pushclient"])
    parser.add_argument("--smoke", action="store_true", help="a few hundred posts, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.posts, args.rounds = 200, 1
    proc, info = start_receiver(1, 1_000_000)
    try:
        asyncio.run(run(args, info))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


if __name__ == "__main__":
    main()
