"""One gateway shard and the simulator: command throughput, e-stop latency, 10k-mower footprint.

Run: python -m tests.bench.gateway [--smoke]

Processes: a nats-server, ``mowdeck sim`` and ``mowdeck gateway`` as subprocesses; this
process publishes commands and reads results; the e-stops come from a process of their own
(``stops_main``, as Fleet publishes them; ``--stops-on-thread`` for the earlier way).
Latencies are wall-clock on one machine. The transport phase runs the gateway's NATS
traffic alone (no gateway, no simulator): the ceiling of any gateway with this message
pattern on this machine. With ``--witness`` a bare subscriber of the stops'
announcements (``witness_main``) splits each e-stop phase at nats-server: publish to the
witness (the publisher and nats-server), witness to device (the gateway and the stopped
mowers' simulator).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import msgspec
from nats.js import api

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    EmergencyStop,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    SetBladeHeight,
    StartMow,
    decode,
    decode_result,
    encode,
)
from contracts.v1.subjects import (
    COMMAND_FILTER,
    COMMANDS,
    EMERGENCY_FILTER,
    FLEET_MOWERS_LIST,
    MSG_ID_HEADER,
    result_subject,
    telemetry_subject,
)
from mowdeck.commands.streams import apply_all
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import Consumer, ConsumerSpec
from mowdeck.kit.garbage_collector import set_young_threshold
from mowdeck.kit.loop_scheduling import run_realtime
from mowdeck.kit.wire import plain_headers, round_trip, subscribe_direct
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer, free_port

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000bec1")
# In the "busy" e-stop run every other mower takes this long over each command, as long
# as the target's own command: each mower is always busy, with two more queued.
BUSY_DEVICE_MS = 2000
# Stops of one round go this far apart: each is a stop the gateway takes on its own.
STOP_SPACING_S = 0.02
# SCHED_FIFO priority of the stand-ins for what has a core of its own in production (the
# stopped mowers' simulator, the stops' publisher) with --stand-ins-realtime; see
# ``StandIns``.
STAND_IN_PRIORITY = 5


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


@contextmanager
def process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess stopped with SIGTERM at the end."""
    with log.open("ab") as sink:
        proc = subprocess.Popen(args, env={**os.environ, **env}, stdout=sink, stderr=sink)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def schedule_process(pid: int, *, realtime: bool) -> str | None:
    """Every thread of ``pid`` SCHED_FIFO (or back to ordinary); the refusal, if any."""
    policy = os.SCHED_FIFO if realtime else os.SCHED_OTHER
    param = os.sched_param(STAND_IN_PRIORITY if realtime else 0)
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setscheduler(int(tid), policy, param)
    except OSError as err:
        return str(err)
    return None


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def gauge(http: aiohttp.ClientSession, url: str, name: str) -> float:
    """A metric value from a Prometheus exposition."""
    async with http.get(url + "/metrics") as r:
        for line in (await r.text()).splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


class Fleet:
    """A simulator and a gateway for ``n`` mowers (plus ``probes`` on a simulator of their own).

    The probes are the mowers that the e-stop phases stop. A real mower reads its socket
    on a CPU of its own; a stop to a mower of the loaded simulator is read only when that
    simulator's event loop, busy with the other mowers' traffic, gets to the socket
    (tens of milliseconds at saturation), which is the simulator's delay, not the
    system's. The probes' simulator carries only the stopped mowers and their starts, so
    its loop reads a stop as the bytes arrive, and the measurement still ends at the
    device: every millisecond of the bus and the gateway stays in it.
    """

    def __init__(
        self,
        nats: NatsServer,
        n: int,
        workdir: Path,
        heartbeat: float = 10.0,
        report_interval: float = 1.0,
        *,
        gateway_env: dict[str, str] | None = None,
        probes: int = 0,
    ) -> None:
        self.gateway_env = gateway_env or {}
        self.probe_count = probes
        self.probe_port = free_port()
        self.probes: list[MowerRegistration] = []
        self.probe_pid: int | None = None
        self.nats = nats
        self.n = n
        self.workdir = workdir
        self.heartbeat = heartbeat
        self.report_interval = report_interval
        self.sim_port = free_port()
        self.gw_port = free_port()
        self.mowers: list[MowerRegistration] = []

    @property
    def sim_url(self) -> str:
        return f"http://127.0.0.1:{self.sim_port}"

    def sim_url_of(self, mower_id: uuid.UUID) -> str:
        """The base URL of the simulator that runs ``mower_id``."""
        if any(p.mower_id == mower_id for p in self.probes):
            return f"http://127.0.0.1:{self.probe_port}"
        return self.sim_url

    @property
    def gw_url(self) -> str:
        return f"http://127.0.0.1:{self.gw_port}"

    @contextmanager
    def run(self) -> Iterator[tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
        with contextlib.ExitStack() as stack:
            sim, self.mowers = stack.enter_context(self._simulator(self.n, self.sim_port, 1))
            if self.probe_count:
                probe_sim, self.probes = stack.enter_context(
                    self._simulator(self.probe_count, self.probe_port, 2)
                )
                self.probe_pid = probe_sim.pid
            hosts = [f"127.0.0.1:{self.sim_port}", f"127.0.0.1:{self.probe_port}"]
            # The registry comes from `fleet.mowers.list`, answered by `serve_fleet_list`
            # (10,000 registrations do not fit into one environment variable).
            env = {
                "MOWDECK_NATS_URL": self.nats.url,
                "MOWDECK_HTTP_PORT": str(self.gw_port),
                "MOWDECK_LOG_LEVEL": "warning",
                "MOWDECK_LOG_FORMAT": "json",
                "MOWDECK_TELEMETRY_HEARTBEAT_SECONDS": str(self.heartbeat),
                "MOWDECK_FLEET_RETRY_MAX_SECONDS": "1",
                "MOWDECK_GATEWAY_DEVICE_HOSTS": json.dumps(hosts),
                # Saturated phases drive a few simulated mowers with hundreds of commands a
                # second each (an outcome and a state per command), far past any device:
                # the link limits that close a flooding device must not close them here.
                "MOWDECK_GATEWAY_DEVICE_FRAMES_PER_SECOND": "1000000",
                "MOWDECK_GATEWAY_DEVICE_FRAME_BURST": "1000000",
                **self.gateway_env,
            }
            with process(
                [sys.executable, "-m", "mowdeck.cli", "gateway"], env, self.workdir / "gateway.log"
            ) as gw:
                yield sim, gw

    @contextmanager
    def _simulator(
        self, n: int, port: int, seed: int
    ) -> Iterator[tuple[subprocess.Popen[bytes], list[MowerRegistration]]]:
        boot = self.workdir / f"mowers-{n}-{seed}.json"
        boot.unlink(missing_ok=True)  # a fleet of the same size earlier in the run wrote one
        sim_args = [
            sys.executable,
            "-m",
            "mowdeck.cli",
            "sim",
            "--mowers",
            str(n),
            "--listen",
            f"127.0.0.1:{port}",
            "--account",
            str(ACCOUNT),
            "--seed",
            str(seed),
            "--report-interval",
            str(self.report_interval),
            "--bootstrap-file",
            str(boot),
            "--log-level",
            "warning",
        ]
        with process(sim_args, {}, self.workdir / f"sim-{port}.log") as sim:
            deadline = time.monotonic() + 120
            while not boot.exists() or not boot.stat().st_size:
                if time.monotonic() > deadline or sim.poll() is not None:
                    raise RuntimeError("simulator did not start; see its log")
                time.sleep(0.1)
            time.sleep(0.2)
            yield sim, msgspec.json.decode(boot.read_bytes(), type=list[MowerRegistration])

    async def serve_fleet_list(self, bus: Bus) -> Any:
        """Answer ``fleet.mowers.list`` like Fleet does, in pages."""

        async def answer(msg: Any) -> None:
            request = decode(msg.data, MowerListRequest)
            await msg.respond(encode(request.answer(self.mowers + self.probes)))

        return await bus.nc.subscribe(FLEET_MOWERS_LIST, cb=answer)

    async def wait_connected(self, http: aiohttp.ClientSession, timeout: float = 300) -> None:
        async def ready() -> bool:
            try:
                connected = await gauge(http, self.gw_url, "mowdeck_gateway_mowers_connected")
                return connected >= self.n + self.probe_count
            except aiohttp.ClientError:
                return False

        await eventually(
            ready, timeout, interval=0.2, what=f"{self.n + self.probe_count} mowers connected"
        )


def envelope(mower: MowerRegistration, body: Any) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=mower.mower_id,
        account_id=mower.account_id,
        command=body,
        issued_by="user:bench",
        now=datetime.now(UTC),
        ttl=timedelta(seconds=120),
    )


class Results:
    """Final results as they are published (a core subscription sees JetStream publishes)."""

    def __init__(self) -> None:
        self.final_at: dict[uuid.UUID, float] = {}
        self.statuses: dict[str, int] = {}

    async def on(self, msg: Any) -> None:
        self.note(decode_result(msg.data))

    def note(self, result: CommandResult) -> None:
        if result.is_final:
            self.final_at.setdefault(result.command_id, time.perf_counter())
            self.statuses[result.status] = self.statuses.get(result.status, 0) + 1


async def publish(bus: Bus, env: CommandEnvelope) -> Any:
    """Publishes many in flight, as Fleet publishes (the kit's headers, a stop's announcement)."""
    return await bus.publisher.command(env, now=env.issued_at)


async def throughput(
    bus: Bus, fleet: Fleet, total: int, pids: dict[str, int], window_per_mower: int = 4
) -> dict[str, float]:
    """Commands per second over every mower, publish-to-result latency, CPU per command.

    Closed loop: at most ``window_per_mower`` commands per mower on average are queued or
    in flight, and each final result lets the next command go. That keeps every mower
    busy (its controller always has the next command waiting) while the queues stay
    bounded, so the rate is what the chain sustains and the latency is service time
    plus a bounded queue, not the age of an open-loop flood.
    """
    results = Results()
    window = asyncio.Semaphore(window_per_mower * len(fleet.mowers))
    ours: set[uuid.UUID] = set()

    async def on_result(msg: Any) -> None:
        # Decoded once: this process is the load generator and shares the two cores.
        result = decode_result(msg.data)
        results.note(result)
        if result.is_final and result.command_id in ours:
            ours.discard(result.command_id)
            window.release()

    sub = await bus.nc.subscribe("command.result.mower.*", cb=on_result)
    sent: dict[uuid.UUID, float] = {}
    envs = [
        envelope(fleet.mowers[i % len(fleet.mowers)], SetBladeHeight(height_mm=20 + i % 80))
        for i in range(total)
    ]
    cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
    start = time.perf_counter()
    acks = []
    for env in envs:
        await window.acquire()
        ours.add(env.command_id)
        sent[env.command_id] = time.perf_counter()
        acks.append(await publish(bus, env))
    await asyncio.gather(*acks)
    deadline = time.monotonic() + 120
    while len(results.final_at) < total and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    end = max(results.final_at.values())
    cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
    await sub.unsubscribe()
    lat = [(results.final_at[c] - t) * 1000 for c, t in sent.items() if c in results.final_at]
    done = len(results.final_at)
    return {
        "commands_per_s": done / (end - start),
        "command_p50_ms": pct(lat, 50),
        "command_p99_ms": pct(lat, 99),
        "completed": done,
        "executed": results.statuses.get("executed", 0),
        **{f"{name}_cpu_ms_per_command": sec * 1000 / max(1, done) for name, sec in cpu.items()},
        **{f"{name}_cores": sec / (end - start) for name, sec in cpu.items()},
    }


async def transport(bus: Bus, url: str, mowers: list[MowerRegistration], total: int) -> float:
    """Commands per second that the gateway's NATS traffic alone sustains on this machine.

    A stand-in gateway in a process of its own (``standin_main``) does per command only
    what the gateway does on the bus; the load is the throughput phase's closed loop from
    this process. The ceiling of any gateway with this message pattern on this machine.
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bench.gateway",
        "--standin",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).strip() == b"ready"
    try:
        fleet = _Stand(mowers)
        rate = (await throughput(bus, fleet, total, {}))["commands_per_s"]  # type: ignore[arg-type]
    finally:
        proc.stdin.close()
        await proc.wait()
    return rate


async def standin_main(url: str) -> None:
    """The stand-in gateway: the bus traffic of each command, nothing else.

    The durable consumer's delivery and its ack, the emergency lane's subscription to the
    stops' announcements (a core subscription on a connection of its own), the
    ``accepted`` and ``executed`` results published to the stream with their acks
    awaited, and one state; no actors, no device.
    Runs until its standard input closes.
    """
    gw = await Bus.connect(url, name="bench-standin")
    lane = await Bus.connect(url, name="bench-standin-lane")
    pending: set[asyncio.Future[Any]] = set()

    async def on_command(msg: Any) -> None:
        env = decode(msg.data, CommandEnvelope)
        await msg.ack()
        for status in ("accepted", "executed"):
            result = CommandResult(
                command_id=env.command_id,
                mower_id=env.mower_id,
                status=status,
                at=datetime.now(UTC),
            )
            ack = await gw.publish_nowait(
                result_subject(env.mower_id), encode(result), msg_id=result.msg_id
            )
            pending.add(ack)
            ack.add_done_callback(pending.discard)
        state = MowerState(
            mower_id=env.mower_id,
            account_id=env.account_id,
            observed_at=datetime.now(UTC),
            activity="mowing",
            battery=80,
        )
        await gw.nc.publish(telemetry_subject(env.mower_id), encode(state))

    async def on_lane(msg: Any) -> None:
        del msg  # the lane only looks at the header of each stop

    await lane.nc.subscribe(EMERGENCY_FILTER, cb=on_lane)
    consumer = Consumer(
        gw,
        ConsumerSpec(
            stream=COMMANDS.name,
            subject=COMMAND_FILTER,
            durable="bench-standin",
            max_ack_pending=2000,
            deliver_policy=api.DeliverPolicy.NEW,
        ),
        on_command,
    )
    await consumer.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await consumer.stop()
    if pending:
        await asyncio.wait(pending, timeout=10)
    await lane.drain()
    await gw.drain()


async def witness_main(url: str) -> None:
    """The witness: when each stop's announcement came out of nats-server.

    A bare subscriber to ``emergency.mower.*`` in a process of its own, run SCHED_FIFO
    where this process may (so that its own wake-up is not what it measures), reading
    the raw bytes as its client parses them. When its standard input closes it prints
    ``seen <command id> <epoch seconds>`` for every stop it saw (among its log lines).
    """
    refused = run_realtime(STAND_IN_PRIORITY)
    bus = await Bus.connect(url, name="bench-witness")
    seen: list[tuple[bytes | str | None, float]] = []

    def on_stop(subject: bytes, reply: bytes, data: bytes, hdr: bytes | None) -> None:
        seen.append((hdr, time.time()))

    async def on_msg(msg: Any) -> None:
        seen.append(((msg.headers or {}).get(MSG_ID_HEADER), time.time()))

    await subscribe_direct(bus.nc, EMERGENCY_FILTER, on_stop, fallback=on_msg)
    await round_trip(bus.nc)
    print(f"ready {refused or 'realtime'}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await bus.drain()
    for hdr, at in seen:
        headers = (plain_headers(hdr) if isinstance(hdr, bytes) else None) or {}
        command_id = hdr if isinstance(hdr, str) else headers.get(MSG_ID_HEADER)
        print(f"seen {command_id} {at:.6f}")


async def helper_process(*args: str) -> asyncio.subprocess.Process:
    """This module run again with ``args`` (a hidden mode), its standard streams piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bench.gateway",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def line_starting(proc: asyncio.subprocess.Process, prefix: str, what: str) -> str:
    """The next line ``proc`` prints that starts with ``prefix`` (past its log lines)."""
    assert proc.stdout is not None
    while True:
        line = (await proc.stdout.readline()).decode()
        assert line, f"{what} ended"
        if line.startswith(prefix):
            return line


class Witness:
    """``witness_main`` in a subprocess: the stops' arrival at a bare subscriber."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._proc: asyncio.subprocess.Process | None = None
        self.realtime = False

    async def start(self) -> None:
        self._proc = await helper_process("--witness-of", self._url)
        line = await line_starting(self._proc, "ready ", "the witness")
        self.realtime = line.split(maxsplit=1)[1].strip() == "realtime"

    async def stop(self) -> dict[str, float]:
        """Every stop seen: its command id and when (epoch seconds)."""
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.close()
        out, _ = await self._proc.communicate()
        seen: dict[str, float] = {}
        for line in out.decode().splitlines():
            if line.startswith("seen "):
                _, command_id, at = line.split()
                seen.setdefault(command_id, float(at))
        return seen


Trace = list[tuple[str, float, float]]  # a stop's command id, publish and device time


def hops(trace: Trace, seen: dict[str, float]) -> dict[str, float]:
    """p99 of a phase's publish to the witness, and witness to device, in ms."""
    up = [(seen[c] - t0) * 1000 for c, t0, _ in trace if c in seen]
    down = [(got - seen[c]) * 1000 for c, _, got in trace if c in seen]
    return {
        "publish_to_witness_p99": round(pct(up, 99), 2),
        "witness_to_device_p99": round(pct(down, 99), 2),
        "n": len(up),
    }


class _Stand:
    """What ``throughput`` needs of a fleet: its mowers."""

    def __init__(self, mowers: list[MowerRegistration]) -> None:
        self.mowers = mowers


async def received_at(
    http: aiohttp.ClientSession, fleet: Fleet, mower_id: uuid.UUID
) -> dict[str, float]:
    """When the simulated mower received each command in its log (wall clock, epoch s)."""
    async with http.get(f"{fleet.sim_url_of(mower_id)}/sim/mowers/{mower_id}") as r:
        doc = await r.json()
    return {
        rec["command_id"]: datetime.fromisoformat(
            rec["received_at"].replace("Z", "+00:00")
        ).timestamp()
        for rec in doc.get("commands", [])
    }


async def _on_thread(fn: Any, *args: Any) -> Any:
    return fn(*args)


class StandIns:
    """The stops' publisher and the stopped mowers' simulator, given a core when they wake.

    In production the stop's publisher (Fleet) and the mower run on cores of their own.
    Here they share two cores with the saturated gateway, simulator, nats-server and load
    generator, and each of them wakes for every stop: with ordinary scheduling each waits
    for a time slice, which is the benchmark's co-location, not the system. With
    ``--stand-ins-realtime`` they run SCHED_FIFO during the e-stop phases (a diagnostic:
    the stop's path through nats-server and the gateway stays scheduled as it is).
    """

    def __init__(self, fleet: Fleet, *, realtime: bool, on_thread: bool = False) -> None:
        self.fleet = fleet
        self.realtime = realtime and fleet.probe_pid is not None
        url = fleet.nats.url
        self.stops: StopPublisher = (
            ThreadStopPublisher(url) if on_thread else ProcessStopPublisher(url)
        )

    async def __aenter__(self) -> StopPublisher:
        refused = await self.stops.start(realtime=self.realtime)
        if refused is None and self.realtime:
            assert self.fleet.probe_pid is not None
            refused = schedule_process(self.fleet.probe_pid, realtime=True)
        if refused is not None:
            print(f"stand-ins ordinarily scheduled: {refused}")
            self.realtime = False
        return self.stops

    async def __aexit__(self, *exc: object) -> None:
        await self.stops.stop()
        if self.realtime and self.fleet.probe_pid is not None:
            schedule_process(self.fleet.probe_pid, realtime=False)


class StopPublisher(Protocol):
    """Publishes the stops as Fleet does, apart from the load generator.

    This process is also the load generator: a stop published on its loop would first
    wait for that loop to get through the results and commands it has queued, and a stop
    published from a thread of it waits for the interpreter, which the busy main thread
    holds nearly all the time at saturation (each hand-over up to the switch interval, and
    longer while the holder waits for a core). Both are the benchmark's delay, not the
    system's: in production the stop's publisher is Fleet, a process of its own.
    ``publish`` returns when each stop was published (wall clock, as the simulator records
    its arrival).
    """

    async def start(self, *, realtime: bool = False) -> str | None:
        """Connect; with ``realtime`` run SCHED_FIFO (the refusal, if any)."""

    async def publish(self, env: CommandEnvelope) -> float:
        """Publish ``env`` (awaiting its acknowledgement); when it was published."""

    async def stop(self) -> None:
        """Drain and end."""


class ProcessStopPublisher:
    """``stops_main`` in a subprocess, one envelope per line on its standard input."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self, *, realtime: bool = False) -> str | None:
        self._proc = await helper_process(
            "--stops-of", self._url, *(["--stops-realtime"] if realtime else [])
        )
        line = await line_starting(self._proc, "ready ", "the stops' publisher")
        said = line.split(maxsplit=1)[1].strip()
        return None if said in ("realtime", "ordinary") else said

    async def publish(self, env: CommandEnvelope) -> float:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(encode(env) + b"\n")
        await self._proc.stdin.drain()
        line = await line_starting(self._proc, "published ", "the stops' publisher")
        return float(line.split()[1])

    async def stop(self) -> None:
        if self._proc is not None and self._proc.stdin is not None:
            self._proc.stdin.close()
            await self._proc.wait()


async def stops_main(url: str, realtime: bool) -> None:
    """The stops' publisher process: each line of standard input is an encoded envelope.

    It publishes each as Fleet does (the kit's publisher: the stream and the stop's
    announcement), waits for the stream's acknowledgement and prints ``published <epoch
    seconds>``, the wall clock taken just before the publish.
    """
    said = "ordinary"
    if realtime:
        said = run_realtime(STAND_IN_PRIORITY) or "realtime"
    set_young_threshold(20_000)  # no collection between a stop's timestamp and its publish
    bus = await Bus.connect(url, name="bench-stops")
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(f"ready {said}", flush=True)
    while line := await reader.readline():
        env = decode(line, CommandEnvelope)
        t0 = time.time()
        await (await publish(bus, env))
        print(f"published {t0!r}", flush=True)
    await bus.drain()


class ThreadStopPublisher:
    """The stops from a thread, event loop and connection of this process (the earlier way,
    ``--stops-on-thread``, for comparison)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._bus: Bus | None = None

    async def start(self, *, realtime: bool = False) -> str | None:
        self._thread.start()
        refused = (
            await self._call(_on_thread(run_realtime, STAND_IN_PRIORITY)) if realtime else None
        )
        self._bus = await self._call(Bus.connect(self._url, name="bench-stops"))
        return refused  # type: ignore[no-any-return]

    async def publish(self, env: CommandEnvelope) -> float:
        async def send() -> float:
            assert self._bus is not None
            t0 = time.time()
            await (await publish(self._bus, env))
            return t0

        t0: float = await self._call(send())
        return t0

    async def stop(self) -> None:
        if self._bus is not None:
            await self._call(self._bus.drain())
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 5)

    async def _call(self, coro: Any) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))


async def estop_latency(
    bus: Bus,
    stops: StopPublisher,
    http: aiohttp.ClientSession,
    fleet: Fleet,
    targets: list[MowerRegistration],
    *,
    loaded: bool,
    count: int,
    device_ms: int = 0,
    hold_s: float = 0.0,
    trace: Trace | None = None,
) -> list[float]:
    """Publish-to-mower latency of ``count`` emergency stops, in ms.

    The stops go to ``targets`` in rounds of one stop per target, ``STOP_SPACING_S``
    apart; under load each target first gets a start that its mower takes 2 s over, so
    every stop overtakes a command in flight at its mower. ``device_ms``: every other
    mower takes that long over each ordinary command (a latency fault), so the load keeps
    each mower busy without the commands being instant; with 0 they are instant and the
    load saturates the machine's CPU instead. ``hold_s``: keep the load up this long
    after the stops (with ``count`` 0: the load alone). ``trace`` gets each stop's
    command id, publish time and arrival at its mower.
    """
    stop_load = asyncio.Event()
    chosen = {m.mower_id for m in targets}
    others = [m for m in fleet.mowers if m.mower_id not in chosen]
    if loaded and device_ms:
        await set_latency(http, fleet, others, device_ms)
    # Closed loop: every other mower always has two commands queued or in flight, so the
    # mowers are saturated without an ever-growing backlog (an open-loop flood past
    # capacity only measures how long the queues have grown).
    window = asyncio.Semaphore(2 * len(others))
    issued: set[uuid.UUID] = set()

    async def on_result(msg: Any) -> None:
        result = decode_result(msg.data)
        if result.is_final and result.command_id in issued:
            issued.discard(result.command_id)
            window.release()

    async def saturate() -> None:
        i = 0
        while not stop_load.is_set():
            await window.acquire()
            env = envelope(others[i % len(others)], SetBladeHeight(height_mm=20 + i % 80))
            issued.add(env.command_id)
            await publish(bus, env)
            i += 1

    results_sub = await bus.nc.subscribe("command.result.mower.*", cb=on_result)
    loader = asyncio.create_task(saturate()) if loaded else None
    latencies: list[float] = []
    try:
        if loaded:
            await asyncio.sleep(1.0)
            await set_latency(http, fleet, targets, 2000)
        while len(latencies) < count:
            if loaded:
                for target in targets:
                    await publish(bus, envelope(target, StartMow()))
                await asyncio.sleep(0.3)  # the 2 s starts are now in flight at the mowers
            sent: list[tuple[MowerRegistration, str, float]] = []
            for target in targets:
                stop = envelope(target, EmergencyStop(reason="bench"))
                sent.append((target, str(stop.command_id), await stops.publish(stop)))
                await asyncio.sleep(STOP_SPACING_S)
            await asyncio.sleep(0.2)
            for target, command_id, t0 in sent:
                for _ in range(50):
                    got = (await received_at(http, fleet, target.mower_id)).get(command_id)
                    if got is not None:
                        latencies.append((got - t0) * 1000)
                        if trace is not None and len(trace) < count:
                            trace.append((command_id, t0, got))
                        break
                    await asyncio.sleep(0.1)
        if loaded and hold_s:
            await asyncio.sleep(hold_s)
    finally:
        stop_load.set()
        if loader is not None:
            for _ in range(len(issued) + 1):
                window.release()  # let the loader see the stop
            await loader
        await results_sub.unsubscribe()
        if loaded:
            await set_latency(http, fleet, targets, None)
        if loaded and device_ms:
            await set_latency(http, fleet, others, None)
    return latencies[:count]


async def set_latency(
    http: aiohttp.ClientSession, fleet: Fleet, mowers: list[MowerRegistration], ms: int | None
) -> None:
    """Give ``mowers`` a device latency of ``ms`` (None: clear their faults)."""
    limit = asyncio.Semaphore(32)

    async def one(mower: MowerRegistration) -> None:
        url = f"{fleet.sim_url_of(mower.mower_id)}/sim/mowers/{mower.mower_id}/faults"
        async with limit:
            if ms is None:
                async with http.delete(url) as r:
                    r.raise_for_status()
            else:
                async with http.post(url, json={"kind": "latency", "ms": ms}) as r:
                    r.raise_for_status()

    await asyncio.gather(*(one(m) for m in mowers))


async def estop_inside(http: aiohttp.ClientSession, fleet: Fleet) -> tuple[float, float]:
    """The gateway's own e-stop histogram (delivery to device send): sum and count."""
    total = await gauge(http, fleet.gw_url, "mowdeck_gateway_emergency_stop_seconds_sum")
    count = await gauge(http, fleet.gw_url, "mowdeck_gateway_emergency_stop_seconds_count")
    return total, count


async def histogram(http: aiohttp.ClientSession, url: str, name: str) -> dict[float, float]:
    """A Prometheus histogram's cumulative bucket counts by upper bound."""
    buckets: dict[float, float] = {}
    async with http.get(url + "/metrics") as r:
        for line in (await r.text()).splitlines():
            if line.startswith(name + "_bucket{"):
                le = line.split('le="', 1)[1].split('"', 1)[0]
                buckets[float(le)] = float(line.split()[-1])
    return buckets


def histogram_pct(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The q-th percentile of what a histogram counted between two readings, in ms.

    Linear within the bucket it falls in, as Prometheus' histogram_quantile does.
    """
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if not total:
        return float("nan")
    rank = q / 100 * total
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower * 1000
            inside = cumulative - below
            fraction = (rank - below) / inside if inside else 1.0
            return (lower + (bound - lower) * fraction) * 1000
        lower, below = bound, cumulative
    return lower * 1000


async def gc_pauses(http: aiohttp.ClientSession, fleet: Fleet) -> dict[str, float]:
    """The gateway's garbage collections so far, per generation: count and total ms."""
    out: dict[str, float] = {}
    for gen in range(3):
        name = f'mowdeck_gc_pause_seconds_{{}}{{{{generation="{gen}"}}}}'
        out[f"gen{gen}_collections"] = await gauge(http, fleet.gw_url, name.format("count"))
        out[f"gen{gen}_ms"] = await gauge(http, fleet.gw_url, name.format("sum")) * 1000
    return out


async def footprint(
    bus: Bus, nats: NatsServer, workdir: Path, n: int, seconds: float
) -> dict[str, float]:
    """Gateway RSS and CPU with ``n`` connected mowers at the default heartbeat.

    The mowers report every 10 s, the gateway's default heartbeat, as well as on every
    change (a mowing mower changes every second or so; these are idle).
    """
    fleet = Fleet(nats, n, workdir, report_interval=10.0)
    with fleet.run() as (_, gw):
        listing = await fleet.serve_fleet_list(bus)
        async with aiohttp.ClientSession() as http:
            await fleet.wait_connected(http, timeout=600)
        await asyncio.sleep(min(5.0, seconds))
        c0 = cpu_seconds(gw.pid)
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        cpu = (cpu_seconds(gw.pid) - c0) / (time.monotonic() - t0) * 100
        await listing.unsubscribe()
        return {"rss_mb": rss_mb(gw.pid), "cpu_pct": cpu}


async def main_async(args: argparse.Namespace) -> None:
    """Run every measurement and print the RESULT line."""
    # This process is the load generator and the stopwatch: its own collections must not
    # land between a stop's timestamp and its publish, and the stops' thread must get the
    # interpreter quickly from a busy main thread.
    set_young_threshold(20_000)
    sys.setswitchinterval(0.001)
    nats = NatsServer()
    nats.start()
    workdir = Path(tempfile.mkdtemp(prefix="mowdeck-bench-gw-"))
    try:
        bus = await Bus.connect(nats.url, name="bench")
        await apply_all(bus)  # the admin step (mowdeck streams)
        gateway_env = {}
        if args.max_in_flight:
            gateway_env["MOWDECK_GATEWAY_MAX_IN_FLIGHT"] = str(args.max_in_flight)
        if args.lane_priority is not None:
            gateway_env["MOWDECK_GATEWAY_LANE_REALTIME_PRIORITY"] = str(args.lane_priority)
        # The stopped mowers: one set per phase (idle, the saturated ones, busy).
        probes = 0 if args.stops_on_loaded_simulator else args.targets * (args.loaded_runs + 2)
        fleet = Fleet(nats, args.mowers, workdir, gateway_env=gateway_env, probes=probes)
        with fleet.run() as (sim, gw):
            stopped = fleet.probes if probes else fleet.mowers
            listing = await fleet.serve_fleet_list(bus)
            async with aiohttp.ClientSession() as http:
                await fleet.wait_connected(http)
                pids = {"gateway": gw.pid, "simulator": sim.pid, "nats": nats.pid}
                await throughput(bus, fleet, min(500, args.commands), pids)  # warm up
                tput = await throughput(bus, fleet, args.commands, pids)
                targets = stopped[: args.targets]
                s0, n0 = await estop_inside(http, fleet)
                collections_before = await gc_pauses(http, fleet)
                witness = Witness(nats.url) if args.witness else None
                if witness is not None:
                    await witness.start()
                traces: dict[str, Trace] = {"idle": []}
                stand_ins = StandIns(
                    fleet, realtime=args.stand_ins_realtime, on_thread=args.stops_on_thread
                )
                async with stand_ins as stops:
                    stop_phase = functools.partial(estop_latency, bus, stops, http, fleet)
                    idle = await stop_phase(
                        targets, loaded=False, count=args.estops, trace=traces["idle"]
                    )
                    s1, n1 = await estop_inside(http, fleet)
                    # Inside the gateway at saturation: admission to final result of the load
                    # alone (the targets' 2 s starts of the stop phases would be its tail).
                    command_seconds = "mowdeck_gateway_command_seconds"
                    await stop_phase([], loaded=True, count=0, hold_s=1.0)
                    admission_before = await histogram(http, fleet.gw_url, command_seconds)
                    await stop_phase([], loaded=True, count=0, hold_s=args.saturated_s)
                    admission_after = await histogram(http, fleet.gw_url, command_seconds)
                    # The saturated phase five times over: its p99 is the worst of the five.
                    estop_seconds = "mowdeck_gateway_emergency_stop_seconds"
                    estop_before = await histogram(http, fleet.gw_url, estop_seconds)
                    loaded_runs: list[list[float]] = []
                    for run in range(args.loaded_runs):
                        first = args.targets * (1 + run)
                        targets = stopped[first : first + args.targets]
                        traces[f"saturated {run + 1}"] = trace = []
                        loaded_runs.append(
                            await stop_phase(targets, loaded=True, count=args.estops, trace=trace)
                        )
                    estop_after = await histogram(http, fleet.gw_url, estop_seconds)
                    s2, n2 = await estop_inside(http, fleet)
                    targets = stopped[-args.targets :]
                    busy = await stop_phase(
                        targets,
                        loaded=True,
                        count=args.busy_estops,
                        device_ms=BUSY_DEVICE_MS,
                        trace=traces.setdefault("busy", []),
                    )
                estop_hops: dict[str, Any] | None = None
                if witness is not None:
                    seen = await witness.stop()
                    estop_hops = {phase: hops(trace, seen) for phase, trace in traces.items()}
                    estop_hops["witness_realtime"] = witness.realtime
                s3, n3 = await estop_inside(http, fleet)
                inside = {
                    "idle_mean_ms": (s1 - s0) / max(1, n1 - n0) * 1000,
                    "loaded_mean_ms": (s2 - s1) / max(1, n2 - n1) * 1000,
                    "busy_mean_ms": (s3 - s2) / max(1, n3 - n2) * 1000,
                    "admission_to_result_loaded_p99_ms": histogram_pct(
                        admission_before, admission_after, 99
                    ),
                    "admission_to_result_loaded_p50_ms": histogram_pct(
                        admission_before, admission_after, 50
                    ),
                    "loaded_p99_ms": histogram_pct(estop_before, estop_after, 99),
                }
                collections_after = await gc_pauses(http, fleet)
                collections = {  # during the e-stop runs
                    k: v - collections_before[k] for k, v in collections_after.items()
                }
            await listing.unsubscribe()
        # The same message pattern with nothing else: the gateway and simulator are gone.
        transport_rate = await transport(bus, nats.url, fleet.mowers, args.commands)
        big = await footprint(bus, nats, workdir, args.big, args.footprint_seconds)
        await bus.drain()
    finally:
        nats.close()
    idle_p99, busy_p99 = pct(idle, 99), pct(busy, 99)
    loaded_p99s = [pct(run, 99) for run in loaded_runs]
    loaded_p99 = max(loaded_p99s)
    admission_p99 = inside["admission_to_result_loaded_p99_ms"]
    print(
        json.dumps(
            {
                "throughput": tput,
                "transport_alone_commands_per_s": transport_rate,
                "estop_idle_ms": {"p50": pct(idle, 50), "p99": idle_p99, "n": len(idle)},
                "estop_loaded_ms": [
                    {"p50": pct(run, 50), "p99": pct(run, 99), "n": len(run)} for run in loaded_runs
                ],
                "loaded_over_idle_p99": [p / idle_p99 if idle_p99 else None for p in loaded_p99s],
                "estop_busy_ms": {"p50": pct(busy, 50), "p99": busy_p99, "n": len(busy)},
                "busy_over_idle_p99": busy_p99 / idle_p99 if idle_p99 else None,
                "estop_inside_gateway": inside,
                "stand_ins_realtime": stand_ins.realtime,
                "gateway_gc": collections,
                **({"estop_hops_ms": estop_hops} if estop_hops is not None else {}),
                f"gateway_{args.big}": big,
            },
            indent=2,
        )
    )
    print(f"logs in {workdir}")
    size = "10k" if args.big == 10_000 else str(args.big)
    print(
        f"RESULT commands_per_s={tput['commands_per_s']:.0f} "
        f"transport_commands_per_s={transport_rate:.0f} "
        f"command_p99_ms={tput['command_p99_ms']:.1f} estop_idle_p99_ms={idle_p99:.1f} "
        f"estop_loaded_p99_ms={loaded_p99:.1f} estop_busy_p99_ms={busy_p99:.1f} "
        f"rss_{size}_mowers_mb={big['rss_mb']:.0f} "
        f"estop_loaded_p99s_ms={','.join(f'{p:.1f}' for p in loaded_p99s)} "
        f"admission_to_result_p99_ms={admission_p99:.1f}"
    )


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="tiny sizes for CI")
    parser.add_argument("--mowers", type=int, default=1000)
    parser.add_argument("--commands", type=int, default=20_000)
    parser.add_argument("--estops", type=int, default=500, help="stops per phase")
    parser.add_argument("--loaded-runs", type=int, default=5, help="saturated phases")
    parser.add_argument("--busy-estops", type=int, default=100)
    parser.add_argument("--targets", type=int, default=25, help="mowers stopped per phase")
    parser.add_argument(
        "--saturated-s", type=float, default=10.0, help="load alone, for admission to result"
    )
    parser.add_argument(
        "--max-in-flight", type=int, default=0, help="MOWDECK_GATEWAY_MAX_IN_FLIGHT (0: default)"
    )
    parser.add_argument(
        "--lane-priority",
        type=int,
        default=None,
        help="MOWDECK_GATEWAY_LANE_REALTIME_PRIORITY (default: the setting's; 0: ordinary)",
    )
    parser.add_argument(
        "--stand-ins-realtime",
        action="store_true",
        help="run the stops' publisher and the stopped mowers' simulator SCHED_FIFO",
    )
    parser.add_argument(
        "--stops-on-loaded-simulator",
        action="store_true",
        help="stop mowers of the loaded simulator (the measurement before the probes)",
    )
    parser.add_argument("--big", type=int, default=10_000)
    parser.add_argument("--footprint-seconds", type=float, default=20.0)
    parser.add_argument(
        "--witness",
        action="store_true",
        help="split each e-stop phase's p99 at a bare subscriber of the stops (estop_hops_ms)",
    )
    parser.add_argument("--standin", metavar="NATS_URL", help=argparse.SUPPRESS)
    parser.add_argument(
        "--stops-on-thread",
        action="store_true",
        help="publish the stops from a thread of this process (the load generator's)",
    )
    parser.add_argument("--witness-of", metavar="NATS_URL", help=argparse.SUPPRESS)
    parser.add_argument("--stops-of", metavar="NATS_URL", help=argparse.SUPPRESS)
    parser.add_argument("--stops-realtime", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stops_of:
        asyncio.run(stops_main(args.stops_of, args.stops_realtime))
        return
    if args.standin:
        asyncio.run(standin_main(args.standin))
        return
    if args.witness_of:
        asyncio.run(witness_main(args.witness_of))
        return
    if args.smoke:
        args.mowers, args.commands, args.estops, args.big = 10, 200, 2, 50
        args.targets, args.loaded_runs, args.busy_estops, args.saturated_s = 1, 2, 2, 1.0
        args.footprint_seconds = 1.0
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
