"""N virtual mowers driven by ONE shared ticker task, and their links to gateways."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import random
import uuid
from datetime import UTC, datetime
from typing import Protocol

import msgspec

from simulator.clock import SimClock
from simulator.faults import Fault, LinkLossFault
from simulator.garden import Garden
from simulator.model import VirtualMower
from simulator.physics import Body, Params
from simulator.protocol import StateFrame, encode_frame

__all__ = ["FleetConfig", "Link", "SimulatorFleet", "UnknownMowerError"]


class UnknownMowerError(KeyError):
    """No simulated mower has this id."""


class FleetConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What to simulate; ``seed`` makes ids, gardens, batteries and RTK changes repeat."""

    mowers: int = 10
    account_id: uuid.UUID | None = None
    seed: int | None = None
    speed: float = 1.0
    report_interval: float = 1.0  # simulated seconds between periodic states
    center_lat: float = 48.137
    center_lon: float = 11.575
    name_prefix: str = "sim"
    autostart: bool = False  # every mower starts a mowing job at once
    params: Params = msgspec.field(default_factory=Params)

    def __post_init__(self) -> None:
        # Zero or NaN would make the ticker spin without yielding (see ``tick``).
        for name in ("speed", "report_interval"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0.0:
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")


class Link(Protocol):
    """A gateway's connection to one mower, as the fleet sees it."""

    def writable(self) -> bool:
        """False while the peer is not reading fast enough (states are then skipped)."""

    async def send(self, data: bytes) -> None:
        """Send one frame."""

    async def drop(self, reason: str) -> None:
        """Close the link from the mower's side."""


class SimulatorFleet:
    """The mowers, the clock and the one ticker that steps and reports all of them."""

    def __init__(self, config: FleetConfig, clock: SimClock | None = None) -> None:
        self.config = config
        self.clock = clock or SimClock(config.speed)
        rng = random.Random(config.seed)
        self.account_id = config.account_id or uuid.UUID(int=rng.getrandbits(128), version=4)
        params = msgspec.structs.replace(config.params, speedup=self.clock.speed)
        now = self.clock.now()
        self.mowers: list[VirtualMower] = [
            _make_mower(rng, i=i, account=self.account_id, cfg=config, params=params, now=now)
            for i in range(config.mowers)
        ]
        self._index = {m.mower_id: i for i, m in enumerate(self.mowers)}
        self.links: list[Link | None] = [None] * len(self.mowers)
        interval = config.report_interval
        # Spread the first reports over one interval so the load is even, not bursty.
        self._due = [
            (now + interval * (i + 0.5) / max(1, len(self.mowers)), i)
            for i in range(len(self.mowers))
        ]
        heapq.heapify(self._due)
        wall_interval = interval / self.clock.speed
        self.tick_seconds = min(0.1, max(0.005, wall_interval / 2))
        self.states_sent = 0
        self.states_skipped = 0
        self._task: asyncio.Task[None] | None = None
        # Set by stop(), cleared by start(): a link made after the links were dropped
        # would keep the HTTP server's shutdown waiting for it.
        self._stopping = False

    def is_stopping(self) -> bool:
        """Whether ``stop()`` was called since the last ``start()``: refuse new links."""
        return self._stopping

    async def start(self) -> None:
        """Start the ticker."""
        self._stopping = False
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="simulator-ticker")

    async def stop(self) -> None:
        """Stop the ticker and drop every link; links made from now on are refused."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for link in [lk for lk in self.links if lk is not None]:
            await link.drop("simulator stopping")

    def index(self, mower_id: uuid.UUID) -> int:
        """The position of a mower, or ``UnknownMowerError``."""
        try:
            return self._index[mower_id]
        except KeyError:
            raise UnknownMowerError(str(mower_id)) from None

    def mower(self, mower_id: uuid.UUID) -> VirtualMower:
        """The mower with this id."""
        return self.mowers[self.index(mower_id)]

    def attach(self, i: int, link: Link) -> Link | None:
        """Make ``link`` the mower's link; returns the one it replaces."""
        old, self.links[i] = self.links[i], link
        return old

    def detach(self, i: int, link: Link) -> None:
        """Forget ``link`` if it is still the mower's link."""
        if self.links[i] is link:
            self.links[i] = None

    async def report(self, i: int, observed_at: datetime | None = None) -> None:
        """Send mower ``i``'s state now, unless it is silenced or nobody listens."""
        link = self.links[i]
        if link is None:
            return
        m = self.mowers[i]
        if m.transport.silent_until > self.clock.wall():
            return
        if not link.writable():
            self.states_skipped += 1
            return
        m.advance(self.clock.now())
        frame = StateFrame(state=m.state(observed_at or datetime.now(UTC)))
        await link.send(encode_frame(frame))
        self.states_sent += 1

    async def inject(self, mower_id: uuid.UUID, fault: Fault) -> None:
        """Inject a fault and report its effect."""
        i = self.index(mower_id)
        self.mowers[i].inject(fault, self.clock.now(), self.clock.wall())
        link = self.links[i]
        if isinstance(fault, LinkLossFault) and link is not None:
            await link.drop("link loss (fault injected)")
            return
        await self.report(i)

    async def clear_faults(self, mower_id: uuid.UUID) -> None:
        """End every fault of a mower and report its state."""
        i = self.index(mower_id)
        self.mowers[i].clear_faults(self.clock.now())
        await self.report(i)

    async def tick(self) -> None:
        """Step and report every mower whose periodic report is due."""
        now = self.clock.now()
        observed = datetime.now(UTC)
        interval = self.config.report_interval
        due = self._due
        while due and due[0][0] <= now:
            at, i = due[0]
            # A ticker that fell behind skips missed reports instead of bursting them.
            nxt = at + interval if at + interval > now else now + interval
            heapq.heapreplace(due, (nxt, i))
            if self.links[i] is None:
                self.mowers[i].advance(now)
            else:
                await self.report(i, observed)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            await self.tick()


def _make_mower(
    rng: random.Random,
    *,
    i: int,
    account: uuid.UUID,
    cfg: FleetConfig,
    params: Params,
    now: float,
) -> VirtualMower:
    mower_id = uuid.UUID(int=rng.getrandbits(128), version=4)
    garden = Garden(
        base_lat=round(cfg.center_lat + rng.uniform(-0.05, 0.05), 6),
        base_lon=round(cfg.center_lon + rng.uniform(-0.08, 0.08), 6),
        width=round(rng.uniform(20.0, 45.0), 1),
        depth=round(rng.uniform(15.0, 35.0), 1),
    )
    battery = round(rng.uniform(60.0, 100.0), 1)
    body = Body(
        activity="charging" if battery < 100.0 else "docked",
        charging=battery < 100.0,
        battery=battery,
        x=garden.dock_x,
        y=garden.dock_y,
    )
    if cfg.autostart:
        body = msgspec.structs.replace(
            body, job="active", activity="leaving" if battery >= params.resume_level else "charging"
        )
    return VirtualMower(
        mower_id=mower_id,
        account_id=account,
        name=f"{cfg.name_prefix}-{i + 1:05d}",
        garden=garden,
        params=params,
        body=body,
        seed=rng.getrandbits(64),
        now=now,
        connection=rng.choice(("wifi", "lte")),
        rtk_source=rng.choice(("ntrip:SAPOS", "ntrip:rtk2go", "base:garden")),
    )
