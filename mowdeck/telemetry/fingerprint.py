"""The storage rules of ADR 0017 as pure functions: what one state writes, given the memory.

- The latest row is written for a state newer than the remembered one; an equal time is a
  redelivery (nothing is written), an older one never touches the latest row.
- A history row is written when a significant field changed, or when the fields were
  unchanged for ``heartbeat`` since the last history row (``history_at``).
- A track point is appended when the position moved at least ``min_move_m`` (about a
  centimetre) from the last stored point, or the RTK fix changed.
- A state whose account differs from the remembered one is dropped.

An older (out-of-order) state writes history or a track point only if it differs from
the memory, and never changes the memory.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import msgspec

from contracts.v1 import MowerState
from mowdeck.telemetry.model import Memory, TrackPoint

__all__ = ["Decision", "Rules", "decide", "decide_all", "moved", "state_fingerprint"]

_EARTH_M = 6_371_008.8
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class Rules:
    """The parameters of the storage rules."""

    heartbeat: timedelta = timedelta(seconds=300)
    min_move_m: float = 0.01


class Decision(msgspec.Struct, frozen=True):
    """What one state writes; ``drop`` names why it writes nothing at all."""

    # A Struct rather than a frozen dataclass: one is made per state on the ingest hot
    # path, and a frozen dataclass pays an ``object.__setattr__`` per field.

    state: MowerState
    latest: bool = False
    history: bool = False
    position: bool = False
    drop: str | None = None

    @property
    def heartbeat_skipped(self) -> bool:
        """A newer state whose history row was skipped as an unchanged heartbeat."""
        return self.latest and not self.history


def state_fingerprint(state: MowerState) -> int:
    """A stable 63-bit digest of the significant fields the ADR lists (position excluded)."""
    fields = (
        state.activity,
        state.battery,
        state.charging,
        state.rtk_fix,
        state.rtk_source,
        state.connection,
        state.blade_height_mm,
        state.speed_mps,
        state.error_code,
    )
    digest = hashlib.blake2b(_encode(fields), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def moved(last: TrackPoint | None, state: MowerState, min_move_m: float) -> bool:
    """Whether the state's position is a new track point after ``last``."""
    if state.position is None:
        return False
    if last is None or last.rtk_fix != state.rtk_fix:
        return True
    lat, lon = state.position.lat, state.position.lon
    north = math.radians(lat - last.lat) * _EARTH_M
    east = math.radians(lon - last.lon) * _EARTH_M * math.cos(math.radians((lat + last.lat) / 2))
    return math.hypot(north, east) >= min_move_m


def _track(state: MowerState) -> TrackPoint | None:
    if state.position is None:
        return None
    return TrackPoint(state.position.lat, state.position.lon, state.rtk_fix)


def decide(
    memory: Memory | None, state: MowerState, rules: Rules
) -> tuple[Decision, Memory | None]:
    """The writes of ``state`` and the memory after it."""
    fp = state_fingerprint(state)
    if memory is None:
        track = _track(state)
        new = Memory(
            account_id=state.account_id,
            observed_at=state.observed_at,
            history_at=state.observed_at,
            state_fp=fp,
            track=track,
        )
        return Decision(state, latest=True, history=True, position=track is not None), new
    if state.account_id != memory.account_id:
        return Decision(state, drop="account-mismatch-stored"), memory
    if state.observed_at == memory.observed_at:
        return Decision(state, drop="duplicate"), memory
    changed = fp != memory.state_fp
    position = moved(memory.track, state, rules.min_move_m)
    if state.observed_at < memory.observed_at:
        return Decision(state, history=changed, position=position), memory
    history = (
        changed
        or memory.history_at is None
        or state.observed_at - memory.history_at >= rules.heartbeat
    )
    new = Memory(
        account_id=memory.account_id,
        observed_at=state.observed_at,
        history_at=state.observed_at if history else memory.history_at,
        state_fp=fp,
        track=_track(state) if position else memory.track,
    )
    return Decision(state, latest=True, history=history, position=position), new


def decide_all(
    memory: Memory | None, states: Sequence[MowerState], rules: Rules
) -> tuple[list[Decision], Memory | None]:
    """``decide`` over one mower's states in arrival order."""
    decisions = []
    for state in states:
        decision, memory = decide(memory, state, rules)
        decisions.append(decision)
    return decisions, memory
