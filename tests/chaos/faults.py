"""Faults at seeded random moments under load, and the probes that tell when service is back.

Each fault is injected, healed as an orchestrator would (a killed process started again,
a stopped one continued, a node restarted), and the next one waits until full service:
a probe command answered ``executed`` again on every gateway shard, and the process hit
ready again. Recovery is measured from the heal (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import random
import signal
import uuid
from dataclasses import dataclass, field

from tests.chaos.driver import Driver
from tests.chaos.topology import SERVICES, Topology

KINDS = (
    "sigkill",
    "sigterm",
    "nats_kill",
    "sigstop",
    "pg_restart",
    "sim_link_drop",
    "sim_late",
    "estop_shard_down",
    "shard_change",
)
STOP_SECONDS = 12.0  # longer than the heartbeats (10 s) and the ack wait (6 s)
RECOVERY_TIMEOUT = 60.0


@dataclass
class Fault:
    """One injected fault."""

    kind: str
    target: str
    t: float
    healed_t: float = 0.0
    recovered_t: float | None = None
    # When the restarted process answered ready again (0: nothing restarted).
    ready_t: float = 0.0
    note: str = ""

    @property
    def recovery_s(self) -> float | None:
        """Seconds from the heal to full service (None: not within the timeout)."""
        return None if self.recovered_t is None else max(0.0, self.recovered_t - self.healed_t)


@dataclass
class Probe:
    """One probe command per shard per second; (issued t, answered t, shard count, shard, ok)."""

    driver: Driver
    topology: Topology
    by_count: dict[int, list[str]]
    answers: list[tuple[float, float, int, int, bool]] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        """Probe every shard once a second until ``stop``."""
        while not stop.is_set():
            count = self.topology.shard_count
            await asyncio.gather(*(self._one(count, i) for i in range(count)))
            await asyncio.sleep(1.0)

    async def _one(self, count: int, shard: int) -> None:
        mower = self.by_count[count][shard]
        rec = await self.driver.command(mower, "set_blade_height", ttl_s=4, purpose="probe", wait=4)
        ok = rec.http == 200 and rec.status == "executed"
        self.answers.append((rec.t, rec.answered_t, count, shard, ok))

    def served_since(self, t: float) -> float | None:
        """When every shard had answered a probe issued after ``t`` (None: not yet)."""
        latest = 0.0
        counts = {c for (it, _, c, _, _) in self.answers if it >= t}
        if not counts:
            return None
        count = max(counts, key=lambda c: max(it for (it, _, cc, _, _) in self.answers if cc == c))
        for shard in range(count):
            oks = [
                a
                for (it, a, c, s, ok) in self.answers
                if ok and it >= t and c == count and s == shard
            ]
            if not oks:
                return None
            latest = max(latest, min(oks))
        return latest


def probe_mowers(mowers: list[str]) -> dict[int, list[str]]:
    """A probe mower for each shard of 2 and of 3 shards (different mowers)."""
    out: dict[int, list[str]] = {}
    used: set[str] = set()
    for count in (2, 3):
        picks = []
        for shard in range(count):
            m = next(m for m in mowers if uuid.UUID(m).int % count == shard and m not in used)
            used.add(m)
            picks.append(m)
        out[count] = picks
    return out


@dataclass
class Injector:
    """Injects the faults in a seeded order, one at a time, each healed and recovered."""

    topology: Topology
    driver: Driver
    probe: Probe
    rng: random.Random
    faults: list[Fault] = field(default_factory=list)
    _turn: dict[str, int] = field(default_factory=dict)

    def schedule(self) -> list[str]:
        """Every kind once, shuffled; then the signals and the rest again, shuffled."""
        first = list(KINDS)
        self.rng.shuffle(first)
        return first

    def _next_target(self, kind: str, pool: list[str]) -> str:
        n = self._turn.get(kind, self.rng.randrange(len(pool)))
        self._turn[kind] = n + 1
        return pool[n % len(pool)]

    async def run(self, stop: asyncio.Event, deadline: float) -> None:
        """Inject until ``deadline`` (run time), every kind at least once first."""
        order = self.schedule()
        while not stop.is_set() and self.driver.now() < deadline:
            if not order:
                order = list(KINDS)
                self.rng.shuffle(order)
            kind = order.pop(0)
            await asyncio.sleep(self.rng.uniform(2.0, 6.0))
            fault = await self._inject(kind)
            self.faults.append(fault)
            await self._recover(fault)
            rec = "timeout" if fault.recovery_s is None else f"{fault.recovery_s:.1f}s"
            print(
                f"chaos: {fault.t:6.1f}s {kind} {fault.target} {fault.note} recovered {rec}",
                flush=True,
            )

    async def _recover(self, fault: Fault) -> None:
        limit = fault.healed_t + RECOVERY_TIMEOUT
        while self.driver.now() < limit:
            at = self.probe.served_since(fault.healed_t)
            if at is not None:
                fault.recovered_t = max(at, fault.ready_t)
                return
            await asyncio.sleep(0.5)

    async def _inject(self, kind: str) -> Fault:
        fault = Fault(kind, "", self.driver.now())
        await getattr(self, f"_{kind}")(fault)
        if not fault.healed_t:
            fault.healed_t = self.driver.now()
        return fault

    async def _restart(self, name: str, fault: Fault | None = None) -> None:
        await asyncio.to_thread(self.topology.start, name)
        if fault is not None:
            fault.ready_t = self.driver.now()

    async def _sigkill(self, fault: Fault) -> None:
        fault.target = name = self._next_target("sigkill", SERVICES)
        await asyncio.to_thread(self.topology.stop, name, signal.SIGKILL)
        await asyncio.sleep(1.0)
        fault.healed_t = self.driver.now()
        await self._restart(name, fault)

    async def _sigterm(self, fault: Fault) -> None:
        fault.target = name = self._next_target("sigterm", SERVICES)
        code = await asyncio.to_thread(self.topology.stop, name, signal.SIGTERM)
        fault.note = f"exit {code}"
        fault.healed_t = self.driver.now()
        await self._restart(name, fault)

    async def _sigstop(self, fault: Fault) -> None:
        fault.target = name = self._next_target("sigstop", SERVICES)
        self.topology.send(name, signal.SIGSTOP)
        await asyncio.sleep(STOP_SECONDS)
        self.topology.send(name, signal.SIGCONT)
        fault.healed_t = self.driver.now()

    async def _nats_kill(self, fault: Fault) -> None:
        index = int(self._next_target("nats_kill", ["0", "1", "2"]))
        fault.target = f"nats-{index}"
        await asyncio.to_thread(self.topology.cluster.kill, index)
        await asyncio.sleep(3.0)
        fault.healed_t = self.driver.now()
        await asyncio.to_thread(self.topology.cluster.restart, index)

    async def _pg_restart(self, fault: Fault) -> None:
        fault.target = "postgres"
        await asyncio.to_thread(self.topology.postgres.restart)
        fault.healed_t = self.driver.now()

    def _victims(self, n: int) -> list[str]:
        free = [m for m in self.driver.mowers if m not in self.driver.reserved]
        return self.rng.sample(free, min(n, len(free)))

    async def _sim_link_drop(self, fault: Fault) -> None:
        victims = self._victims(20)
        fault.target = f"{len(victims)} mowers"
        for m in victims:
            await self.driver.fault(m, {"kind": "link_loss", "seconds": 5})
        await asyncio.gather(
            *(self.driver.command(m, "set_speed", ttl_s=10, purpose="link_drop") for m in victims)
        )

    async def _sim_late(self, fault: Fault) -> None:
        victims = self._victims(20)
        fault.target = f"{len(victims)} mowers"
        for m in victims:
            await self.driver.fault(m, {"kind": "latency", "ms": 4000})
        await asyncio.gather(
            *(self.driver.command(m, "pause_mow", ttl_s=10, purpose="late") for m in victims)
        )

    async def _estop_shard_down(self, fault: Fault) -> None:
        count = self.topology.shard_count
        shard = int(self._next_target("estop_shard_down", [str(i) for i in range(count)]))
        fault.target = name = f"gateway-{shard}"
        await asyncio.to_thread(self.topology.stop, name, signal.SIGKILL)
        mowers = [m for m in self._victims(60) if uuid.UUID(m).int % count == shard][:3]
        await asyncio.gather(
            *(
                self.driver.command(m, "emergency_stop", ttl_s=20, purpose="estop_down")
                for m in mowers
            )
        )
        await asyncio.sleep(2.0)
        fault.healed_t = self.driver.now()
        await self._restart(name, fault)

    async def _shard_change(self, fault: Fault) -> None:
        fault.target = "2->3->2"
        await self._reshard(3)
        await asyncio.sleep(10.0)
        await self._reshard(2)
        fault.healed_t = self.driver.now()

    async def _reshard(self, count: int) -> None:
        """Change the shard count: every shard stopped (SIGTERM, drained), then the new
        count started. Two counts never run side by side, so no mower has two owners."""
        old = [f"gateway-{i}" for i in range(self.topology.shard_count)]
        await asyncio.gather(
            *(asyncio.to_thread(self.topology.stop, n, signal.SIGTERM) for n in old)
        )
        new = [f"gateway-{i}" for i in range(count)]
        for name in new:
            self.topology.set_shard_count(name, count)
        await asyncio.gather(*(self._restart(n) for n in new))
        self.topology.shard_count = count
