"""Web Push delivery benchmark: the webpush channel against pywebpush's ``webpush()``.

Run: python -m tests.bench.notifications_push [--smoke]

A local push service runs in its own process (``tests.support.webpush_receiver``): it
answers 201 at once, verifies every distinct VAPID JWT and decrypts one push in 50 to
prove the payloads are right. Both sides encrypt for real (aes128gcm, a fresh ECDH key
per message) and sign VAPID for real.

- channel: ``WebPushChannel.send`` with at most 64 deliveries in flight over the
  channel's push client (kept-alive HTTP/1.1 connections); one JWT per push service
  origin.
- naive: pywebpush's synchronous ``webpush()`` one at a time to the same receiver, a fresh
  claims dict per call (it mutates the one it is given), so a JWT per message and a new
  connection per message.
- state to push (``tests.bench.notifications_state_push``): a state published on the bus to
  the push received, through the Notifications service (rules, fan-out with recipients,
  delivery worker, webpush channel), 200 firing states per second for distinct mowers; p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

import aiohttp
from py_vapid import Vapid02
from pywebpush import webpush

from mowdeck.notifications.delivery.channels import ChannelSettings, Delivery
from mowdeck.notifications.delivery.channels.pushhttp import PushClient
from mowdeck.notifications.delivery.channels.webpush import WebPushChannel
from mowdeck.notifications.delivery.targets import TargetPolicy
from tests.bench.notifications_state_push import run_state_to_push
from tests.bench.push_work import deliveries, start_receiver

SUBJECT = "mailto:bench@mowdeck.example"


async def run_channel(
    origin: str, subs: list[dict[str, Any]], count: int, in_flight: int, vapid: Vapid02
) -> tuple[float, dict[str, int]]:
    settings = ChannelSettings(
        notifications_push_hosts=["127.0.0.1"],
        notifications_insecure_hosts=["127.0.0.1"],
        notifications_http_connections=in_flight,
    )
    work = deliveries(subs, count)
    policy = TargetPolicy.from_settings(settings)
    client = PushClient(policy, limit=settings.notifications_http_connections)
    channel = WebPushChannel(client, vapid, subject=SUBJECT, policy=policy, timeout=10)
    statuses: dict[str, int] = {}
    gate = asyncio.Semaphore(in_flight)

    async def one(delivery: Delivery) -> None:
        async with gate:
            result = await channel.send(delivery)
        statuses[result.status] = statuses.get(result.status, 0) + 1

    # Warm up: the connection pool and the one JWT of this origin.
    await asyncio.gather(*(one(d) for d in work[:in_flight]))
    statuses.clear()
    started = time.perf_counter()
    await asyncio.gather(*(one(d) for d in work))
    elapsed = time.perf_counter() - started
    await channel.close()
    return count / elapsed, statuses


def run_naive(subs: list[dict[str, Any]], count: int, vapid: Vapid02) -> float:
    data = json.dumps({"title": "Mower 12: battery low", "body": "Battery at 18 %"})
    started = time.perf_counter()
    for i in range(count):
        webpush(
            subs[i % len(subs)],
            data,
            vapid_private_key=vapid,
            vapid_claims={"sub": SUBJECT},
            ttl=3600,
            timeout=10,
        )
    return count / (time.perf_counter() - started)


async def stats(origin: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.get(origin + "/stats") as response:
        result: dict[str, Any] = await response.json()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="a few seconds, to check it runs")
    parser.add_argument("--deliveries", type=int, default=None)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    count = args.deliveries or (600 if args.smoke else 20_000)
    naive_count = 40 if args.smoke else 400
    latency_seconds = 3.0 if args.smoke else 20.0
    vapid = Vapid02()
    vapid.generate_keys()
    proc, info = start_receiver(200, 50)
    try:
        origin, subs = info["origin"], info["subscriptions"]
        rate, statuses = asyncio.run(run_channel(origin, subs, count, args.in_flight, vapid))
        before = asyncio.run(stats(origin))
        naive = run_naive(subs, naive_count, vapid)
        after = asyncio.run(stats(origin))
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    print(f"channel: {count} deliveries, {args.in_flight} in flight: {rate:,.0f}/s {statuses}")
    print(f"naive webpush(): {naive_count} deliveries one at a time: {naive:,.0f}/s")
    naive_pushes = after["received"] - before["received"]
    print(
        f"receiver: {before['received']} pushes, {before['decrypted']} decrypted and checked,"
        f" problems {after['problems']}; naive pushes {naive_pushes}"
    )
    ok = statuses == {"sent": count} and not after["problems"] and before["decrypted"] > 0
    print(f"ratio: {rate / naive:.1f}x; correct: {ok}")
    latency = asyncio.run(run_state_to_push(rate=200, seconds=latency_seconds))
    print(
        f"state to push: {latency.count} of {latency.expected} notifications at 200/s through"
        f" the service, state published to push received: p50 {latency.p50_ms:.0f} ms,"
        f" p99 {latency.p99_ms:.0f} ms, max {latency.max_ms:.0f} ms (to notifications.sent,"
        f" after the inbox commit: p50 {latency.inbox_p50_ms:.0f} ms,"
        f" p99 {latency.inbox_p99_ms:.0f} ms); published behind"
        f" schedule by at most {latency.lag_ms:.0f} ms; {latency.decrypted} decrypted,"
        f" problems {latency.problems}"
    )
    ok = ok and latency.count == latency.expected and latency.decrypted > 0 and not latency.problems
    print(
        f"RESULT webpush_deliveries_per_s={rate:.0f} naive_webpush_deliveries_per_s={naive:.0f}"
        f" state_to_push_p99_ms={latency.p99_ms:.0f}"
    )
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
