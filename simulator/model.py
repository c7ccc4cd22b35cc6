"""The virtual mower: physics plus faults, RTK and a log of the commands it received."""

from __future__ import annotations

import uuid
from collections import deque
from datetime import datetime
from typing import Literal

import msgspec

from contracts.v1 import Area, Command, MowerState, Position, RtkFix, StartMow, command_kind
from simulator.areas import AreaError, plan_route
from simulator.faults import (
    BatteryFault,
    ErrorFault,
    EscapeFault,
    Fault,
    LatencyFault,
    LinkLossFault,
    RejectFault,
    SilenceFault,
    StuckFault,
    TheftFault,
    TransportFaults,
)
from simulator.garden import Garden, heading_to
from simulator.physics import Body, Job, Params, apply_command, step

__all__ = ["CommandRecord", "VirtualMower"]

_MASK = (1 << 64) - 1
_RTK_MEAN_SECONDS = 300.0  # a fix change every five simulated minutes on average
_HISTORY = 100
# Ids whose outcome a mower remembers (a repeat is answered with it): a gateway resends
# the commands it held when it crashed, hundreds of commands later on a busy mower.
_REMEMBER = 4096


class CommandRecord(msgspec.Struct, kw_only=True):
    """One command as the mower received it, and what it answered."""

    command_id: uuid.UUID
    kind: str
    received_at: datetime
    status: Literal["pending", "executed", "failed"] = "pending"
    reason: str | None = None
    answered_at: datetime | None = None
    # Command frames that carried this id, repeats included (a repeat is answered with
    # the first outcome and not executed again).
    frames: int = 1


def _splitmix(state: int) -> tuple[int, float]:
    # A 64-bit generator in one int: a Random() per mower would cost 2.5 KB each.
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, (z ^ (z >> 31)) / 2.0**64


class VirtualMower:
    """One simulated mower; ``now`` is simulated seconds, ``wall`` monotonic seconds."""

    __slots__ = (
        "_by_id",
        "_rand",
        "account_id",
        "areas",
        "body",
        "commands",
        "connection",
        "garden",
        "last",
        "mower_id",
        "name",
        "params",
        "rtk_fix",
        "rtk_source",
        "transport",
    )

    def __init__(
        self,
        *,
        mower_id: uuid.UUID,
        account_id: uuid.UUID,
        name: str,
        garden: Garden,
        params: Params,
        body: Body,
        seed: int,
        now: float,
        connection: str = "wifi",
        rtk_source: str = "ntrip:SAPOS",
    ) -> None:
        self.mower_id = mower_id
        self.account_id = account_id
        self.name = name
        self.garden = garden
        self.params = params
        self.body = body
        self.last = now
        self.connection = connection
        self.rtk_fix: RtkFix = "fixed"
        self.rtk_source = rtk_source
        self.transport = TransportFaults()
        # The site's areas as the control API set them (``simulator/areas.py``).
        self.areas: tuple[Area, ...] = ()
        self.commands: deque[CommandRecord] | None = None  # created on the first command
        # The latest record of each id in ``commands``: a repeated id is looked up per
        # command, and a scan of the log cost a hundred comparisons each time.
        # Bounded by _REMEMBER, not by the log: repeats must be recognised long after.
        self._by_id: dict[uuid.UUID, CommandRecord] | None = None
        self._rand = seed & _MASK

    def _random(self) -> float:
        self._rand, u = _splitmix(self._rand)
        return u

    def advance(self, now: float) -> None:
        """Move the physics forward to ``now``."""
        dt = now - self.last
        if dt <= 0.0:
            return
        self.body = step(self.body, dt, now, self.params, self.garden)
        self.last = now
        if self._random() < dt / _RTK_MEAN_SECONDS:
            u = self._random()
            self.rtk_fix = "fixed" if u < 0.8 else "float" if u < 0.95 else "none"

    def execute(self, command: Command, now: float) -> str | None:
        """Carry out ``command`` at ``now``; ``None`` when executed, else why it failed."""
        self.advance(now)
        garden = self.garden
        if isinstance(command, StartMow):
            try:
                garden = self._garden_for(command.work_area)
            except AreaError as err:
                return str(err)
        self.body, reason = apply_command(self.body, command, now, self.params)
        if reason is None:
            self.garden = garden
        return reason

    def _garden_for(self, work_area: str | None) -> Garden:
        """The garden with the route of ``work_area``; without one, the whole lawn."""
        g = msgspec.structs.replace(self.garden, route=None)
        if work_area is None:
            return g
        route = plan_route(self.areas, work_area, g.to_local, lane=g.lane, margin=0.3)
        return msgspec.structs.replace(g, route=route)

    def record(self, command_id: uuid.UUID, command: Command | None, at: datetime) -> CommandRecord:
        """Log a received command (``None`` when it could not be decoded)."""
        log, by_id = self.commands, self._by_id
        if log is None or by_id is None:
            log = self.commands = deque(maxlen=_HISTORY)
            by_id = self._by_id = {}
        kind = command_kind(command) if command is not None else "invalid"
        rec = CommandRecord(command_id=command_id, kind=kind, received_at=at)
        log.append(rec)
        by_id.pop(command_id, None)  # the newest record of an id goes last
        by_id[command_id] = rec
        if len(by_id) > _REMEMBER:
            del by_id[next(iter(by_id))]
        return rec

    def find(self, command_id: uuid.UUID) -> CommandRecord | None:
        """The latest record of ``command_id`` remembered, if any."""
        return None if self._by_id is None else self._by_id.get(command_id)

    def remembered(self) -> int:
        """How many command ids the mower remembers (at most ``_REMEMBER``)."""
        return 0 if self._by_id is None else len(self._by_id)

    def frames(self) -> dict[uuid.UUID, int]:
        """Command frames received per remembered id, repeats included."""
        return {} if self._by_id is None else {c: r.frames for c, r in self._by_id.items()}

    def inject(self, fault: Fault, now: float, wall: float) -> None:
        """Apply a fault at simulated ``now`` and wall-clock ``wall``."""
        self.advance(now)
        b, t = self.body, self.transport
        match fault:
            case StuckFault():
                self.body = msgspec.structs.replace(b, stuck=True, stuck_since=None)
            case ErrorFault(code=code):
                job: Job = "held" if b.job == "active" else b.job
                self.body = msgspec.structs.replace(
                    b,
                    activity="error",
                    error_code=code,
                    job=job,
                    charging=False,
                    manual_linear=0.0,
                    manual_angular=0.0,
                )
            case BatteryFault(level=level):
                self.body = msgspec.structs.replace(b, battery=float(level))
            case EscapeFault():
                self.body = msgspec.structs.replace(
                    b, activity="mowing", charging=False, escape_mps=b.speed_mps,
                    heading=self._away_heading(),
                )  # fmt: skip
            case TheftFault(speed_mps=speed):
                job = "held" if b.job == "active" else b.job
                self.body = msgspec.structs.replace(
                    b, activity="error", error_code="lifted", job=job, charging=False,
                    carried_mps=speed, escape_mps=0.0, heading=self._away_heading(),
                )  # fmt: skip
            case LinkLossFault(seconds=s):
                t.link_down_until = wall + s
            case SilenceFault(seconds=s):
                t.silent_until = wall + s
            case LatencyFault(ms=ms):
                t.latency_ms = ms
            case RejectFault():
                t.reject = True

    def _away_heading(self) -> float:
        """The compass heading from the lawn's centre through the mower (north at it)."""
        b, g = self.body, self.garden
        dx, dy = b.x - g.width / 2, b.y - g.depth / 2
        return 0.0 if dx == dy == 0.0 else heading_to(dx, dy)

    def clear_faults(self, now: float) -> None:
        """End every fault; an error the faults caused is cleared to ``idle``, an escape
        drives home."""
        self.advance(now)
        self.transport = TransportFaults()
        b = self.body
        escaped = b.escape_mps > 0.0
        b = msgspec.structs.replace(
            b, stuck=False, stuck_since=None, escape_mps=0.0, carried_mps=0.0
        )
        if escaped and b.activity == "mowing":
            b = msgspec.structs.replace(b, activity="returning", job="none", job_ends_at=None)
        if b.activity == "error":
            b = msgspec.structs.replace(b, activity="idle", error_code=None)
        self.body = b

    def faults(self, wall: float) -> dict[str, object]:
        """The faults in force, by kind."""
        out = self.transport.active(wall)
        if self.body.stuck:
            out["stuck"] = {}
        if self.body.escape_mps:
            out["escape"] = {}
        if self.body.carried_mps:
            out["theft"] = {"speed_mps": self.body.carried_mps}
        if self.body.activity == "error":
            out["error"] = {"code": self.body.error_code}
        return out

    def state(self, observed_at: datetime) -> MowerState:
        """The state as the mower reports it."""
        b = self.body
        lat, lon = self.garden.to_latlon(b.x, b.y)
        heading = round(b.heading, 1) % 360.0
        progress = 100.0 * b.progress / self.garden.path_length
        return MowerState(
            mower_id=self.mower_id,
            account_id=self.account_id,
            observed_at=observed_at,
            activity=b.activity,
            battery=min(100, max(0, round(b.battery))),
            charging=b.charging,
            rtk_fix=self.rtk_fix,
            rtk_source=self.rtk_source if self.rtk_fix != "none" else None,
            connection=self.connection,
            blade_height_mm=b.blade_height_mm,
            speed_mps=b.speed_mps,
            error_code=b.error_code,
            position=Position(lat=round(lat, 7), lon=round(lon, 7), heading_deg=heading),
            raw={"job": b.job, "progress_pct": round(progress, 1)},
        )
