"""A 3-node cluster: the seed list, an R3 stream, and its leader killed under load."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Iterator

import pytest
from nats.js import api

from contracts.v1.subjects import StreamSpec
from mowdeck.kit.bus import Bus, header
from tests.support.natscluster import NatsCluster
from tests.support.natsserver import NatsServer, free_port

LOAD = StreamSpec(name="LOAD", subjects=("load.>",), duplicate_window_s=120, max_age_s=3600)


@pytest.fixture
def cluster() -> Iterator[NatsCluster]:
    c = NatsCluster()
    c.start()
    yield c
    c.close()


async def test_a_dead_first_seed_is_skipped(nats_server: NatsServer) -> None:
    bus = await Bus.connect(f"nats://127.0.0.1:{free_port()}, {nats_server.url}", name="seeds")
    try:
        assert bus.connected
    finally:
        await bus.drain()


async def test_streams_are_created_with_three_replicas(cluster: NatsCluster) -> None:
    await cluster.wait_ready()
    bus = await Bus.connect(cluster.url, name="admin")
    try:
        await bus.ensure_streams([LOAD], replicas=3)
        info = await bus.js.stream_info(LOAD.name)
        assert info.config.num_replicas == 3
        assert info.cluster is not None
        assert len(info.cluster.replicas or []) == 2  # the two followers besides the leader
    finally:
        await bus.drain()


@pytest.mark.slow
async def test_killing_the_stream_leader_loses_nothing_acknowledged(cluster: NatsCluster) -> None:
    await cluster.wait_ready()
    admin = await Bus.connect(cluster.url, name="admin")
    await admin.ensure_streams([LOAD], replicas=3)
    await admin.drain()
    publisher = await Bus.connect(cluster.url, name="publisher")
    reader = await Bus.connect(cluster.url, name="reader")
    acked: list[str] = []
    acked_after_kill: list[str] = []
    consumed: collections.Counter[str] = collections.Counter()
    consumed_after_kill = 0
    killed = asyncio.Event()
    stop = asyncio.Event()  # publishing
    done = asyncio.Event()  # consuming

    async def publish() -> None:
        i = 0
        while not stop.is_set():
            msg_id = f"m{i}"
            try:
                await publisher.publish(f"load.{i % 50}", b"x", msg_id=msg_id)
            except Exception:  # no leader yet, the node gone: the same msg id again
                await asyncio.sleep(0.05)
                continue
            (acked_after_kill if killed.is_set() else acked).append(msg_id)
            i += 1

    async def consume() -> None:
        nonlocal consumed_after_kill
        # A batch in flight to a fetch that gave up (or to a node that died) comes again
        # after the ack wait: short here, so the test need not wait the default 30 s.
        config = api.ConsumerConfig(ack_wait=2.0)
        sub = await reader.js.pull_subscribe(
            "load.>", durable="reader", stream=LOAD.name, config=config
        )
        while not done.is_set():
            try:
                msgs = await sub.fetch(200, timeout=0.5)
            except Exception:  # a timeout, or the consumer's leader moving
                await asyncio.sleep(0.05)
                continue
            for msg in msgs:
                consumed[header(msg, "Nats-Msg-Id") or ""] += 1
                if killed.is_set():
                    consumed_after_kill += 1
                with contextlib.suppress(Exception):
                    await msg.ack()

    tasks = [asyncio.create_task(publish()), asyncio.create_task(consume())]
    try:
        await asyncio.sleep(1.5)
        leader = await cluster.leader_of(LOAD.name)
        cluster.kill(leader)
        killed.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while (len(acked_after_kill) < 300 or consumed_after_kill < 300) and loop.time() < deadline:
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(tasks[0], timeout=10)
        everything = acked + acked_after_kill
        while loop.time() < deadline + 10 and any(consumed[m] == 0 for m in everything):
            await asyncio.sleep(0.1)
        done.set()
        await asyncio.wait_for(tasks[1], timeout=10)
    finally:
        for task in tasks:
            task.cancel()
        await publisher.drain()
        # Draining waits for the pull subscription's last fetch; nothing is left to settle.
        await reader.nc.close()

    assert len(acked) > 100, "publishing ran before the kill"
    assert len(acked_after_kill) >= 300, "publishing resumed after the leader died"
    assert consumed_after_kill >= 300, "consuming resumed after the leader died"
    lost = [m for m in everything if consumed[m] == 0]
    assert lost == [], f"{len(lost)} acknowledged messages never consumed"
    assert await cluster.leader_of(LOAD.name) != leader
