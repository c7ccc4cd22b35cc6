"""A durable's deliveries, read through nats-py's callback subscription or directly.

Run: python -m tests.bench.deliveries [--messages 60000] [--rounds 3] [--smoke]

The same stream content (``--messages`` of 420 bytes, as a state is, over 10,000
subjects) is consumed by a new durable per measurement, alternately by the kit's
``Consumer`` (nats-py's push subscription: a queue and an awaited callback per
delivery) and its ``DirectConsumer`` (the deliver subject read on the connection's read
loop), each handing deliveries to a queue and acknowledging them 2,000 at a time with
``ack_all``, as the state pipelines do. The figure is this process's CPU per delivery
from the consumer's start to the last ack written; rounds alternate so the machine's
drift falls on both alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import time

from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec, DirectConsumer
from mowdeck.kit.wire import ack_all
from tests.support.natsserver import NatsServer

STREAM = "BENCHDELIVERIES"
BATCH = 2000


def cpu_seconds() -> float:
    """User and system CPU of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def fill(bus: Bus, count: int) -> None:
    """A fresh stream with ``count`` state-sized messages."""
    with contextlib.suppress(NotFoundError):
        await bus.js.delete_stream(STREAM)
    await bus.js.add_stream(name=STREAM, subjects=[f"{STREAM.lower()}.>"])
    payload = b"x" * 420
    acks = []
    for n in range(count):
        subject = f"{STREAM.lower()}.mower.{n % 10_000}"
        acks.append(await bus.publish_nowait(subject, payload, msg_id=str(n)))
        if len(acks) == BATCH:
            await asyncio.gather(*acks)
            acks = []
    await asyncio.gather(*acks)


async def consume(bus: Bus, count: int, durable: str, direct: bool) -> float:
    """CPU microseconds per delivery to read and acknowledge ``count`` deliveries."""
    queued: list[Msg] = []
    done = asyncio.Event()
    acks: set[asyncio.Task[None]] = set()
    seen = 0
    loop = asyncio.get_running_loop()

    def take(msg: Msg) -> None:
        nonlocal seen
        queued.append(msg)
        seen += 1
        if len(queued) == BATCH or seen == count:
            batch = queued[:]
            queued.clear()
            task = loop.create_task(ack_all(batch))
            acks.add(task)
            task.add_done_callback(acks.discard)
            if seen == count:
                done.set()

    async def take_async(msg: Msg) -> None:
        take(msg)

    spec = ConsumerSpec(stream=STREAM, subject=f"{STREAM.lower()}.>", durable=durable)
    consumer: Consumer = (
        DirectConsumer(bus, spec, take) if direct else Consumer(bus, spec, take_async)
    )
    started = cpu_seconds()
    await consumer.start()
    await done.wait()
    await asyncio.gather(*acks)
    await bus.nc.flush()
    used = cpu_seconds() - started
    await consumer.stop()
    await bus.js.delete_consumer(STREAM, durable)
    return used / count * 1e6


async def run(messages: int, rounds: int) -> None:
    """Alternate the two ways for ``rounds`` rounds and print the figures."""
    server = NatsServer()
    server.start()
    try:
        bus = await Bus.connect(server.url, name="bench-deliveries")
        await fill(bus, messages)
        figures: dict[str, list[float]] = {"kit": [], "direct": []}
        for n in range(rounds):
            for name in ("kit", "direct") if n % 2 == 0 else ("direct", "kit"):
                started = time.perf_counter()
                us = await consume(bus, messages, f"bench-{name}-{n}", name == "direct")
                rate = messages / (time.perf_counter() - started)
                figures[name].append(us)
                print(f"round {n + 1} {name:6s} {us:5.1f} us CPU per delivery, {rate:,.0f}/s")
        await bus.drain()
    finally:
        server.close()
    kit, direct = statistics.median(figures["kit"]), statistics.median(figures["direct"])
    print(
        f"RESULT kit_us_per_delivery={kit:.1f} direct_us_per_delivery={direct:.1f}"
        f" kit_over_direct={kit / direct:.2f}"
    )


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=60_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a few thousand, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.rounds = 3000, 1
    asyncio.run(run(args.messages, args.rounds))


if __name__ == "__main__":
    main()
