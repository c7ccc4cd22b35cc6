"""The load driver: commands through Fleet's REST API, rule-firing faults on simulated mowers.

Everything it is told is recorded (``Issued``): the replica asked, the HTTP status, the
command id and status answered, or the error. The checker compares that with what the
system kept and what each device was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

KINDS: dict[str, dict[str, Any]] = {
    "start_mow": {"kind": "start_mow", "duration_min": 30},
    "pause_mow": {"kind": "pause_mow"},
    "resume_mow": {"kind": "resume_mow"},
    "return_to_dock": {"kind": "return_to_dock"},
    "emergency_stop": {"kind": "emergency_stop", "reason": "chaos run"},
    "set_blade_height": {"kind": "set_blade_height", "height_mm": 40},
    "set_speed": {"kind": "set_speed", "speed_mps": 0.5},
    "manual_drive": {"kind": "manual_drive", "linear_mps": 0.2, "angular_rps": 0.0},
}
# A rule's kind fires at most once per 300 s and mower (ADR 0022); a margin on top.
RULE_COOLDOWN_S = 330.0
# How long a mower with a fired rule is kept from the load before its fault is cleared.
RULE_HOLD_S = 30.0
WEIGHTS = {
    "start_mow": 3,
    "pause_mow": 2,
    "resume_mow": 2,
    "return_to_dock": 2,
    "emergency_stop": 1,
    "set_blade_height": 2,
    "set_speed": 2,
    "manual_drive": 1,
}


@dataclass
class Issued:
    """One command the driver sent, and what it was told."""

    t: float
    replica: str
    mower: str
    kind: str
    ttl_s: float
    purpose: str
    http: int | None = None
    command_id: str | None = None
    status: str | None = None
    error: str | None = None
    answered_t: float = 0.0

    @property
    def accepted(self) -> bool:
        """Fleet said it took the command (a command id with a 2xx)."""
        return self.http is not None and 200 <= self.http < 300 and self.command_id is not None


@dataclass
class Induced:
    """A rule-firing fault the driver gave a mower, and the notification it should cause."""

    t: float
    mower: str
    fault: dict[str, Any]
    expects: str | None
    wall: datetime


@dataclass
class Driver:
    """Issues commands at ``rate`` a second over Fleet's replicas; records everything."""

    fleets: list[str]
    sim_url: str
    token: str
    mowers: list[str]
    rng: random.Random
    started: float
    rate: float = 4.0
    issued: list[Issued] = field(default_factory=list)
    induced: list[Induced] = field(default_factory=list)
    # Mowers the load leaves alone (probes, SSE clients' command targets stay reachable).
    reserved: set[str] = field(default_factory=set)
    # When each mower last had a rule fired (run seconds).
    ruled: dict[str, float] = field(default_factory=dict)
    session: aiohttp.ClientSession | None = field(default=None, repr=False)
    _releases: set[asyncio.Task[None]] = field(default_factory=set, repr=False)

    def now(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            self.session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=aiohttp.ClientTimeout(total=15),
            )
        return self.session

    async def close(self) -> None:
        """Close the HTTP session."""
        if self.session is not None:
            await self.session.close()

    async def command(
        self,
        mower: str,
        kind: str,
        *,
        ttl_s: float,
        purpose: str,
        wait: float | None = None,
        replica: int | None = None,
    ) -> Issued:
        """POST one command to a Fleet replica; the record of it."""
        index = self.rng.randrange(len(self.fleets)) if replica is None else replica
        rec = Issued(self.now(), str(index), mower, kind, ttl_s, purpose)
        self.issued.append(rec)
        url = f"{self.fleets[index]}/v1/mowers/{mower}/commands"
        if wait is not None:
            url += f"?wait={wait}"
        body = {"command": KINDS[kind], "ttl_s": ttl_s}
        try:
            async with self._session().post(url, json=body) as answer:
                rec.http = answer.status
                doc = await answer.json(content_type=None)
                if isinstance(doc, dict):
                    rec.command_id = doc.get("command_id")
                    rec.status = doc.get("status") or doc.get("title")
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            rec.error = type(err).__name__
        rec.answered_t = self.now()
        return rec

    async def fault(self, mower: str, fault: dict[str, Any], expects: str | None = None) -> bool:
        """Inject ``fault`` into a simulated mower; whether the simulator took it."""
        url = f"{self.sim_url}/sim/mowers/{mower}/faults"
        try:
            async with self._session().post(url, json=fault) as answer:
                ok = answer.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        if ok:
            self.induced.append(Induced(self.now(), mower, fault, expects, datetime.now(UTC)))
        return ok

    def pick(self) -> str:
        """A mower the load may use."""
        free = [m for m in self.mowers if m not in self.reserved]
        return self.rng.choice(free or self.mowers)

    async def run(self, stop: asyncio.Event) -> None:
        """Commands at the rate until ``stop``; every eighth meant to expire on a late mower."""
        kinds = list(WEIGHTS)
        weights = [WEIGHTS[k] for k in kinds]
        pending: set[asyncio.Task[Issued]] = set()
        n = 0
        while not stop.is_set():
            n += 1
            mower = self.pick()
            if n % 8 == 0:
                # Meant to expire: the mower answers 3 s late, the command lives 1 s.
                await self.fault(mower, {"kind": "latency", "ms": 3000})
                coro = self.command(mower, "set_speed", ttl_s=1, purpose="expire")
            else:
                kind = self.rng.choices(kinds, weights)[0]
                ttl = self.rng.choice([5, 10, 20])
                coro = self.command(mower, kind, ttl_s=ttl, purpose="load")
            task = asyncio.ensure_future(coro)
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(self.rng.expovariate(self.rate))
        if pending:
            await asyncio.wait(pending)

    async def rules(self, stop: asyncio.Event, every: float = 6.0) -> None:
        """Make mowers fire rules: errors (``mower_stuck``), flat batteries.

        A mower is left alone by the load while its notification is awaited, then its
        fault is cleared and it is given back; a rule is fired on it again only after the
        rules' cooldown (ADR 0022: a kind at most once per 300 s and mower)."""
        while not stop.is_set():
            now = self.now()
            free = [
                m
                for m in self.mowers
                if m not in self.reserved and now - self.ruled.get(m, -1e9) > RULE_COOLDOWN_S
            ]
            if free:
                mower = self.rng.choice(free)
                self.ruled[mower] = now
                self.reserved.add(mower)  # its notification is awaited: no load on it
                if self.rng.randrange(2) == 0:
                    await self.fault(mower, {"kind": "error", "code": "lifted"}, "mower_stuck")
                else:
                    # Low while charging at the dock tells nobody (ADR 0022): no expectation.
                    await self.fault(mower, {"kind": "battery", "level": 8})
                task = asyncio.ensure_future(self._give_back(mower, stop))
                self._releases.add(task)
                task.add_done_callback(self._releases.discard)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=every)

    async def _give_back(self, mower: str, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=RULE_HOLD_S)
        if stop.is_set():
            return  # the mower keeps its fault to the end of the run
        try:
            async with self._session().delete(f"{self.sim_url}/sim/mowers/{mower}/faults"):
                pass
        except (aiohttp.ClientError, TimeoutError):
            return  # still faulty: stays reserved
        self.reserved.discard(mower)


def new_id() -> str:
    """A fresh id."""
    return str(uuid.uuid4())
