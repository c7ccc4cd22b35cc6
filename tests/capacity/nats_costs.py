"""nats-server's CPU per stored and per delivered message, at one replica and at three.

A stream like TELEMETRY (file storage) takes ``count`` state-sized messages published as
the gateway publishes states (core publishes into the stream, no ack per message); then
one push consumer reads and acknowledges each, as the services' consumers do. The CPU
of every nats-server process (from /proc) per message, and of the stream's leader alone,
are what the capacity model uses.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import nats
from nats.aio.msg import Msg
from nats.js import api

from contracts.v1 import MowerState, Position, encode
from tests.soak.procs import cpu_seconds
from tests.support.natscluster import NatsCluster
from tests.support.natsserver import NatsServer

__all__ = ["measure_nats", "state_payload"]

_STREAM = "CAPACITY"


def state_payload() -> bytes:
    """A mowing mower's state as the gateway publishes it (the size that matters)."""
    state = MowerState(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        observed_at=datetime.now(UTC),
        activity="mowing",
        battery=73,
        rtk_fix="fixed",
        connection="lte",
        blade_height_mm=45,
        speed_mps=0.5,
        position=Position(lat=48.1372, lon=11.5755, heading_deg=92.0),
    )
    return encode(state)


def _cpu(pids: Sequence[int]) -> list[float]:
    return [cpu_seconds(p) for p in pids]


async def _one(urls: list[str], pids: list[int], replicas: int, count: int) -> dict[str, float]:
    nc = await nats.connect(urls)
    js = nc.jetstream(timeout=10)
    try:
        await js.add_stream(
            name=_STREAM, subjects=["capacity.>"], num_replicas=replicas, storage="file"
        )
        info = await js.stream_info(_STREAM)
        leader = info.cluster.leader if info.cluster is not None else None
        lead = next((i for i, u in enumerate(urls) if leader and leader.endswith(str(i))), 0)
        payload = state_payload()
        subjects = [f"capacity.mower.{uuid.uuid4()}" for _ in range(1000)]
        before = _cpu(pids)
        for i in range(count):
            await nc.publish(subjects[i % len(subjects)], payload)
            if i % 1000 == 999:
                await nc.flush()
        while (await js.stream_info(_STREAM)).state.messages < count:
            await asyncio.sleep(0.05)
        stored = [a - b for a, b in zip(_cpu(pids), before, strict=True)]
        done = asyncio.Event()
        seen = 0

        async def on(msg: Msg) -> None:
            nonlocal seen
            await msg.ack()
            seen += 1
            if seen >= count:
                done.set()

        before = _cpu(pids)
        sub = await js.subscribe(
            "capacity.>", durable="capacity", cb=on, manual_ack=True,
            config=api.ConsumerConfig(max_ack_pending=20_000),
        )  # fmt: skip
        await asyncio.wait_for(done.wait(), timeout=300)
        await nc.flush()
        await asyncio.sleep(0.5)  # the last acks reach the server and its peers
        delivered = [a - b for a, b in zip(_cpu(pids), before, strict=True)]
        await sub.unsubscribe()
        await js.delete_stream(_STREAM)
    finally:
        await nc.close()
    return {
        "cpu_us_per_stored": sum(stored) / count * 1e6,
        "leader_cpu_us_per_stored": stored[lead] / count * 1e6,
        "cpu_us_per_delivered": sum(delivered) / count * 1e6,
        "leader_cpu_us_per_delivered": delivered[lead] / count * 1e6,
        "payload_bytes": len(payload),
    }


async def measure_nats(count: int = 50_000) -> dict[str, dict[str, float]]:
    """The costs at R1 (one server) and at R3 (a cluster of three on this machine)."""
    single = NatsServer()
    single.start()
    try:
        r1 = await _one([single.url], [single.pid], 1, count)
    finally:
        single.close()
    cluster = NatsCluster(3)
    cluster.start()
    try:
        await cluster.wait_ready()
        pids = [n.proc.pid for n in cluster.nodes if n.proc is not None]
        r3 = await _one(cluster.urls, pids, 3, count)
    finally:
        cluster.close()
    return {"r1": r1, "r3": r3}


if __name__ == "__main__":
    print(asyncio.run(measure_nats(20_000)))
