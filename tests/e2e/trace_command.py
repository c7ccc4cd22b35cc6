"""Show one command's whole path, from publish to result, in the gateway's log.

Run: python -m tests.e2e.trace_command

Starts a nats-server, two simulated mowers and a gateway shard in this process with
debug logging, publishes one ``set_blade_height`` and prints every log line that carries
its command id: published, admitted, accepted, sent to the mower, answered, executed.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from datetime import UTC, datetime, timedelta

from contracts.v1 import CommandEnvelope, SetBladeHeight
from mowdeck.commands.streams import apply_all
from mowdeck.gateway.service import GatewayService
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.logging import configure_logging
from simulator import FleetConfig, SimulatorServer
from tests.support.natsserver import NatsServer


async def trace() -> list[dict[str, object]]:
    """Run the command through and return its log records (JSON lines)."""
    buffer = io.StringIO()
    configure_logging("debug", "json")
    logging.getLogger().handlers[0].setStream(buffer)  # type: ignore[attr-defined]
    nats = NatsServer()
    nats.start()
    sim = SimulatorServer(FleetConfig(mowers=2, seed=3, speed=10.0))
    await sim.start()
    gateway = GatewayService(
        GatewaySettings(
            nats_url=nats.url,
            http_port=0,
            bootstrap_mowers=sim.registrations(),
            gateway_device_hosts=["127.0.0.1"],
        )
    )
    bus = await Bus.connect(nats.url, name="trace")
    try:
        await apply_all(bus)  # the admin step (mowdeck streams): services only wait for it
        await gateway.start()
        while not all(c.connected for c in gateway.connections.values()):
            await asyncio.sleep(0.02)
        mower = sim.registrations()[0]
        env = CommandEnvelope.issue(
            mower_id=mower.mower_id,
            account_id=mower.account_id,
            command=SetBladeHeight(height_mm=35),
            issued_by="user:demo",
            now=datetime.now(UTC),
            ttl=timedelta(seconds=30),
        )
        logging.getLogger("trace").info(
            json.dumps({"event": "command published", "command_id": str(env.command_id)})
        )
        await bus.publish_command(env, now=datetime.now(UTC))
        for _ in range(500):
            if '"status": "executed"' in buffer.getvalue():
                break
            await asyncio.sleep(0.01)
    finally:
        await bus.drain()
        await gateway.stop()
        await sim.stop()
        nats.close()
    wanted = str(env.command_id)
    records = []
    for line in buffer.getvalue().splitlines():
        if wanted not in line:
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc.get("event"), str) and doc["event"].startswith("{"):
            doc = {**doc, **json.loads(doc["event"])}
        records.append(doc)
    return records


def main() -> None:
    """Print the path."""
    for record in asyncio.run(trace()):
        keys = ("timestamp", "logger", "event", "status", "kind", "reason")
        print(" ".join(f"{k}={record[k]}" for k in keys if record.get(k) is not None))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
