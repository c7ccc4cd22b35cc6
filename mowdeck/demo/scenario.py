"""What the demo's simulated fleet does so that notifications come within minutes.

Three mowers get work: one mows a short job and comes home (``mowing_finished``), one
has its battery drop to nearly flat half a minute in (``battery_low``), and one gets
stuck about a minute in (a fault injected through the simulator, ``mower_stuck``). The
other mowers stay docked. Everything goes through the real paths: commands on the bus to
the gateway, faults through the simulator's fault API.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import structlog

from contracts.v1 import CommandEnvelope, StartMow
from mowdeck.kit.bus import Bus
from simulator import BatteryFault, SimulatorServer, StuckFault

__all__ = ["LOW_AFTER_SECONDS", "STUCK_AFTER_SECONDS", "run_scenario"]

log = structlog.get_logger("mowdeck.demo")

LOW_AFTER_SECONDS = 30.0
STUCK_AFTER_SECONDS = 60.0
# Simulated minutes: at the demo's default speed a few wall-clock minutes, well over the
# rules' minimum job of 2 minutes whichever clock the states carry.
_SHORT_JOB_MIN = 20


async def _start(bus: Bus, mower_id: uuid.UUID, account_id: uuid.UUID, minutes: int | None) -> None:
    now = datetime.now(UTC)
    envelope = CommandEnvelope.issue(
        mower_id=mower_id,
        account_id=account_id,
        command=StartMow(duration_min=minutes),
        issued_by="user:demo",
        now=now,
    )
    await bus.publish_command(envelope, now=now)


async def run_scenario(
    bus: Bus, sim: SimulatorServer, account_id: uuid.UUID, *, settle: float = 15.0
) -> None:
    """Start the three mowers' stories; returns once the fault is injected."""
    mowers = [r.mower_id for r in sim.registrations()]
    if len(mowers) < 3:
        return
    finisher, flat, stuck = mowers[:3]
    # Let the first states arrive: the first state of a mower only starts its watch.
    await asyncio.sleep(settle)
    # Full batteries, so the mowers leave at once instead of charging first.
    for mower_id, minutes in ((finisher, _SHORT_JOB_MIN), (flat, None), (stuck, None)):
        await sim.inject(mower_id, BatteryFault(level=100))
        await _start(bus, mower_id, account_id, minutes)
    log.info("demo jobs started", finisher=str(finisher), low_battery=str(flat), stuck=str(stuck))
    await asyncio.sleep(LOW_AFTER_SECONDS)
    await sim.inject(flat, BatteryFault(level=19))
    await asyncio.sleep(STUCK_AFTER_SECONDS - LOW_AFTER_SECONDS)
    await sim.inject(stuck, StuckFault())
    log.info("demo fault injected", mower_id=str(stuck), fault="stuck")
