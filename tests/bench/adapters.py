"""The ``automower`` adapter against the stand-in Automower Connect cloud, at fleet size.

Run: python -m tests.bench.adapters [--smoke] [--mowers N] [--credentials K] [--events E]

The stand-in cloud (``simulator.automower.standin``, the vendor's limit of one request a
second per application key kept) runs in a process of its own with ``--mowers`` mowers
spread over ``--credentials`` keys, each key's mowers its own. This process runs what a
gateway shard runs of the adapter: one ``AutomowerConnection`` per mower on the shared
account links (token, WebSocket, limiter per key), each state mapped to a ``MowerState``
and counted (the shard's actors and the bus are not part of it: ``gateway`` measures
those). Figures:

- ``automower_events_per_s``: events read, merged and mapped to states per second while
  the cloud sends ``--events`` position events per mower as fast as it can;
- ``automower_cpu_us_per_event``: this process's CPU time per mapped event then;
- ``automower_requests_per_mower_day``: REST requests the cloud answered while the links
  ran (events flowing, no commands), per mower and day; the goal is none, beyond the one
  ``GET /mowers`` per key after each (re)connect, given as ``automower_snapshot_requests``;
- ``automower_command_p99_ms``: command to outcome (``executed`` from the events after
  the API's 202) for starts and pauses issued at 0.8 per key and second, under the
  vendor's limit; the stand-in acts 100 ms after its 202, as the vendor's cloud does
  a moment later.

Then the ``openmower`` adapter, when a ``mosquitto`` binary is installed (else
``openmower=skipped``): ``--openmowers`` stand-in OpenMowers (``simulator.openmower.standin``)
in a process of their own, each publishing ``robot_state/json`` every 0.1 s on one
Mosquitto, and one ``OpenMowerConnection`` each here (one MQTT connection per mower).
``openmower_states_per_s`` and ``openmower_cpu_us_per_state`` over ``--window`` seconds;
``openmower_command_p99_ms``: a start to the ``robot_state`` that shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import multiprocessing.connection
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contracts.v1 import CommandEnvelope, MowerRegistration, MowerState, PauseMow, StartMow
from contracts.v1 import Connection as MowerConnection
from mowdeck.devices.automower import AutomowerEndpoints
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import ConnectionDeps
from mowdeck.gateway.connections.automower import AutomowerConnection
from mowdeck.gateway.connections.credentials import Credentials

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000bec40")


# --- the cloud, in a process of its own -----------------------------------------------


def _cloud_main(pipe: multiprocessing.connection.Connection, mowers: int, keys: int) -> None:
    asyncio.run(_cloud(pipe, mowers, keys))


async def _cloud(pipe: multiprocessing.connection.Connection, mowers: int, keys: int) -> None:
    from simulator.automower.standin import StandInCloud, StandInMower  # noqa: PLC0415

    logins = {f"bench-app-{k}": f"secret-{k}" for k in range(keys)}
    cloud = StandInCloud(logins, expires_in=3600)
    owners = list(logins)
    for i in range(mowers):
        cloud.add(StandInMower(f"m{i:05d}", owner=owners[i % keys]))
    await cloud.start()
    pipe.send(("ready", cloud.endpoints, logins))
    loop = asyncio.get_running_loop()
    while True:
        what, arg = await loop.run_in_executor(None, pipe.recv)
        if what == "burst":
            started = time.perf_counter()
            sent = await _burst(cloud, arg)
            pipe.send(("sent", sent, time.perf_counter() - started))
        elif what == "stats":
            pipe.send(("stats", len(cloud.requests), cloud.token_requests, cloud.throttled))
        else:
            await cloud.stop()
            pipe.send(("stopped", None))
            return


async def _burst(cloud: Any, events: int) -> int:
    """``events`` position events for every mower, as fast as the sockets take them."""
    sockets = dict(cloud._sockets)
    by_owner: dict[str, list[Any]] = {}
    for ws, client in sockets.items():
        by_owner.setdefault(client, []).append(ws)
    sent = 0
    for n in range(events):
        for mower in cloud.mowers.values():
            lat, lon = 57.7 + n * 1e-5, 14.47 + (sent % 997) * 1e-6
            data = (
                f'{{"id":"{mower.id}","type":"position-event-v2","attributes":'
                f'{{"position":{{"latitude":{lat:.7f},"longitude":{lon:.7f}}}}}}}'
            )
            for ws in by_owner.get(mower.owner, ()):
                await ws.send_str(data)
                sent += 1
    return sent


def _openmowers_main(pipe: multiprocessing.connection.Connection, port: int, n: int) -> None:
    asyncio.run(_openmowers(pipe, port, n))


async def _openmowers(pipe: multiprocessing.connection.Connection, port: int, n: int) -> None:
    from simulator.openmower.standin import StandInOpenMower  # noqa: PLC0415

    mowers = [StandInOpenMower("127.0.0.1", port, prefix=f"bench/{i}/") for i in range(n)]
    for mower in mowers:
        await mower.start()
    pipe.send(("ready", None))
    await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
    for mower in mowers:
        await mower.stop()
    pipe.send(("stopped", None))


# --- the adapter, in this process ------------------------------------------------------


class _Count:
    """The connection events of every mower: states counted, links up."""

    def __init__(self) -> None:
        self.states = 0
        self.up = 0

    def sink(self) -> Any:
        count = self

        class Events:
            def on_state(self, state: MowerState) -> None:
                count.states += 1

            def on_link(self, up: bool, reason: str | None) -> None:
                count.up += 1 if up else -1

        return Events()


async def _until(check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("not reached in time")
        await asyncio.sleep(0.01)


async def _commands(conns: list[AutomowerConnection], keys: int, rounds: int) -> list[float]:
    """Start, then pause, one mower of each key per round, 1.25 s apart."""
    took: list[float] = []

    async def one(conn: AutomowerConnection, command: Any) -> None:
        envelope = CommandEnvelope.issue(
            mower_id=conn.registration.mower_id,
            account_id=ACCOUNT,
            command=command,
            issued_by="bench",
            now=datetime.now(UTC),
        )
        started = time.perf_counter()
        outcome = await conn.send(envelope, timeout=30)
        if outcome.status != "executed":
            raise RuntimeError(f"{command}: {outcome}")
        took.append((time.perf_counter() - started) * 1000)

    for r in range(rounds):
        batch = [conns[(r // 2) * keys + k] for k in range(keys)]
        command = StartMow() if r % 2 == 0 else PauseMow()
        await asyncio.gather(*(one(c, command) for c in batch))
        await asyncio.sleep(1.25)
    return took


async def _run(
    args: argparse.Namespace, pipe: multiprocessing.connection.Connection
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    _, endpoints, logins = await loop.run_in_executor(None, pipe.recv)

    async def ask(what: str, arg: Any = None) -> Any:
        pipe.send((what, arg))
        return await loop.run_in_executor(None, pipe.recv)

    folder = Path(tempfile.mkdtemp(prefix="mowdeck-bench-adapters-"))
    names = []
    for k, (client, secret) in enumerate(logins.items()):
        names.append(f"key-{k}")
        (folder / f"key-{k}.json").write_text(
            json.dumps({"client_id": client, "client_secret": secret})
        )
    deps = ConnectionDeps(
        DeviceHosts(["127.0.0.1"]), Credentials(folder), automower=AutomowerEndpoints(**endpoints)
    )
    count = _Count()
    conns = [
        AutomowerConnection(
            MowerRegistration(
                mower_id=uuid.uuid4(),
                account_id=ACCOUNT,
                name=f"m{i:05d}",
                connection=MowerConnection(
                    kind="automower",
                    options={"vendor_id": f"m{i:05d}", "credentials": names[i % args.credentials]},
                ),
            ),
            count.sink(),
            deps=deps,
        )
        for i in range(args.mowers)
    ]
    started = time.perf_counter()
    for conn in conns:
        await conn.open()
    await _until(lambda: count.up == args.mowers, 60)
    linked_s = time.perf_counter() - started
    _, snapshot_requests, tokens, _ = await ask("stats")

    before = count.states
    wall0, cpu0 = time.perf_counter(), time.process_time()
    _, sent, send_s = await ask("burst", args.events)
    await _until(lambda: count.states - before >= sent, 120)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    mapped = count.states - before
    await asyncio.sleep(args.quiet)  # the links idle: pings only
    steady_s = time.perf_counter() - wall0
    _, after_requests, _, _ = await ask("stats")

    took = await _commands(conns, args.credentials, args.rounds)
    _, _, _, throttled = await ask("stats")
    for conn in conns:
        await conn.close()
    await deps.close()
    await ask("stop")
    steady = after_requests - snapshot_requests
    return {
        "automower_events_per_s": round(mapped / wall),
        "automower_cpu_us_per_event": round(cpu / mapped * 1e6, 1),
        "automower_requests_per_mower_day": round(steady / args.mowers * 86400 / steady_s, 3),
        "automower_command_p99_ms": round(statistics.quantiles(took, n=100)[98], 1),
        "automower_command_p50_ms": round(statistics.median(took), 1),
        "automower_snapshot_requests": snapshot_requests,
        "automower_token_requests": tokens,
        "automower_throttled": throttled,
        "automower_linked_s": round(linked_s, 2),
        "automower_cloud_send_per_s": round(sent / send_s),
        "mowers": args.mowers,
        "credentials": args.credentials,
        "events": mapped,
        "commands": len(took),
    }


async def _openmower(args: argparse.Namespace) -> dict[str, Any]:
    """The OpenMower phase, on a Mosquitto of its own."""
    from mowdeck.demo.brands import Mosquitto, mosquitto_binary  # noqa: PLC0415
    from mowdeck.gateway.connections.openmower import OpenMowerConnection  # noqa: PLC0415

    binary = mosquitto_binary()
    if binary is None:
        return {"openmower": "skipped"}
    broker = Mosquitto(binary, Path(tempfile.mkdtemp(prefix="mowdeck-bench-mqtt-")), "127.0.0.1")
    await broker.start()
    parent, child = multiprocessing.Pipe()
    mowers = multiprocessing.get_context("spawn").Process(
        target=_openmowers_main, args=(child, broker.port, args.openmowers), daemon=True
    )
    mowers.start()
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, parent.recv)
        deps = ConnectionDeps(DeviceHosts(["127.0.0.1"]))
        count = _Count()
        conns = [
            OpenMowerConnection(
                MowerRegistration(
                    mower_id=uuid.uuid4(),
                    account_id=ACCOUNT,
                    name=f"om{i}",
                    connection=MowerConnection(
                        kind="openmower",
                        options={"broker": broker.url, "prefix": f"bench/{i}/",
                                 "datum": {"lat": 48.1, "lon": 11.6}},
                    ),
                ),
                count.sink(),
                deps=deps,
            )
            for i in range(args.openmowers)
        ]  # fmt: skip
        for conn in conns:
            await conn.open()
        await _until(lambda: count.up == args.openmowers, 60)
        await asyncio.sleep(1.0)
        before, wall0, cpu0 = count.states, time.perf_counter(), time.process_time()
        await asyncio.sleep(args.window)
        states = count.states - before
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        took = []
        for conn in conns[: min(len(conns), 50)]:
            await _until(lambda c=conn: c.actions is not None, 10)
            envelope = CommandEnvelope.issue(
                mower_id=conn.registration.mower_id,
                account_id=ACCOUNT,
                command=StartMow(),
                issued_by="bench",
                now=datetime.now(UTC),
            )
            started = time.perf_counter()
            outcome = await conn.send(envelope, timeout=10)
            if outcome.status != "executed":
                raise RuntimeError(f"openmower start: {outcome}")
            took.append((time.perf_counter() - started) * 1000)
        for conn in conns:
            await conn.close()
        await deps.close()
    finally:
        parent.send(("stop", None))
        mowers.join(10)
        if mowers.is_alive():
            mowers.kill()
        broker.stop()
    return {
        "openmower_states_per_s": round(states / wall),
        "openmower_cpu_us_per_state": round(cpu / states * 1e6, 1),
        "openmower_command_p99_ms": round(statistics.quantiles(took, n=100)[98], 1),
        "openmowers": args.openmowers,
    }


def main() -> None:
    """Measure and print the RESULT line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few seconds only")
    parser.add_argument("--mowers", type=int, default=1000)
    parser.add_argument("--credentials", type=int, default=10)
    parser.add_argument("--events", type=int, default=20, help="position events per mower")
    parser.add_argument("--quiet", type=float, default=10.0, help="idle seconds after them")
    parser.add_argument("--rounds", type=int, default=10, help="command rounds (one per key)")
    parser.add_argument("--openmowers", type=int, default=100, help="0: no OpenMower phase")
    parser.add_argument("--window", type=float, default=10.0, help="OpenMower seconds measured")
    args = parser.parse_args()
    if args.smoke:
        args.mowers, args.credentials, args.events, args.quiet, args.rounds = 60, 3, 3, 0.5, 4
        args.openmowers, args.window = 5, 1.0
    parent, child = multiprocessing.Pipe()
    cloud = multiprocessing.get_context("spawn").Process(
        target=_cloud_main, args=(child, args.mowers, args.credentials), daemon=True
    )
    cloud.start()
    try:
        result = asyncio.run(_run(args, parent))
    finally:
        cloud.join(10)
        if cloud.is_alive():
            cloud.kill()
    if args.openmowers > 0:
        result |= asyncio.run(_openmower(args))
    named = (
        "automower_events_per_s",
        "automower_cpu_us_per_event",
        "automower_requests_per_mower_day",
        "automower_command_p99_ms",
    )
    others = {k: v for k, v in result.items() if k not in named}
    print("figures " + " ".join(f"{k}={v}" for k, v in others.items()), flush=True)
    # The issue's keys, exactly, on the last line.
    print("RESULT " + " ".join(f"{k}={result[k]}" for k in named), flush=True)


if __name__ == "__main__":
    main()
