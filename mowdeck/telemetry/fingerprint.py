"""The storage rules of ADR 0017 as pure functions: what one state writes, given the memory.

- The latest row is written for a state newer than the remembered one; an equal time is a
  redelivery (nothing is written), an older one never touches the latest row.
- A history row is written when a significant field changed, or when the fields were
  unchanged for ``heartbeat`` since the last history row (``history_at``).
- A track point is appended when the position moved at least ``min_move_m`` (about a
  centimetre) from the last stored point, or the RTK fix changed.
- A state whose account differs from the remembered one is dropped.

An older (out-of-order) state writes history or a track point only if it differs from
the memory. A history row it writes puts an older value after the latest state's in
the history, which would then read as if the mower had gone back to it: the latest state
is written to the history again (``reassert``; the primary key keeps it once), so the
history ends in what the mower reports now. That is the memory's one change an older
state makes: ``history_at`` becomes the latest state's time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import msgspec

from contracts.v1 import MowerState
from mowdeck.telemetry.model import Memory, TrackPoint

__all__ = ["Decision", "Rules", "decide", "decide_all", "moved", "state_fingerprint"]

_EARTH_M = 6_371_008.8
_encode = msgspec.json.Encoder().encode
_DIGESTS_MAX = 4096


@dataclass(frozen=True, slots=True)
class Rules:
    """The parameters of the storage rules, and the fingerprint memo of those who use them."""

    heartbeat: timedelta = timedelta(seconds=300)
    min_move_m: float = 0.01
    # States observed further than this ahead of the service's clock are dropped.
    max_clock_skew: timedelta = timedelta(seconds=300)
    # Fingerprints by encoded fields (see ``state_fingerprint``): one memo per service,
    # shared by its actors (dict operations are atomic).
    digests: dict[bytes, int] = field(default_factory=dict, compare=False, repr=False)


class Decision(msgspec.Struct, frozen=True):
    """What one state writes; ``drop`` names why it writes nothing at all."""

    # A Struct rather than a frozen dataclass: one is made per state on the ingest hot
    # path, and a frozen dataclass pays an ``object.__setattr__`` per field.

    state: MowerState
    latest: bool = False
    history: bool = False
    position: bool = False
    drop: str | None = None
    # An older state whose history row comes before the latest state's time: the latest
    # state is written to the history again after it.
    reassert: bool = False

    @property
    def heartbeat_skipped(self) -> bool:
        """A newer state whose history row was skipped as an unchanged heartbeat."""
        return self.latest and not self.history


def state_fingerprint(state: MowerState, digests: dict[bytes, int] | None = None) -> int:
    """A stable 63-bit digest of the significant fields the ADR lists (position excluded);
    ``digests`` remembers the digests of encodings seen before."""
    encoded = _encode(
        (
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
    )
    # The digest is most of the cost, and a fleet repeats a few encodings all the time (an
    # idle mower sends the same fields every heartbeat). Keyed by the encoding itself, the
    # memo answers what the digest would.
    if digests is None:
        return _digest(encoded)
    fp = digests.get(encoded)
    if fp is None:
        fp = _digest(encoded)
        if len(digests) >= _DIGESTS_MAX:
            digests.clear()
        digests[encoded] = fp
    return fp


def _digest(encoded: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(encoded, digest_size=8).digest(), "big") >> 1


def moved(last: TrackPoint | None, state: MowerState, min_move_m: float) -> bool:
    """Whether the state's position is a new track point after ``last``."""
    if state.position is None:
        return False
    if last is None or last.rtk_fix != state.rtk_fix:
        return True
    lat, lon = state.position.lat, state.position.lon
    if lat == last.lat and lon == last.lon:
        # A docked or idle mower reports the same point again and again: its distance is 0.
        return min_move_m <= 0.0
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
    [decision], memory = decide_all(memory, [state], rules)
    return decision, memory


def decide_all(
    memory: Memory | None, states: Sequence[MowerState], rules: Rules
) -> tuple[list[Decision], Memory | None]:
    """The writes of each of one mower's states, in arrival order, and the memory after."""
    # This runs for every state the ingest receives: the memory's fields are carried in
    # locals and the new Memory is built once per call, not once per newer state.
    decisions: list[Decision] = []
    remaining = iter(states)
    if memory is None:
        first = next(remaining, None)
        if first is None:
            return decisions, None
        track = _track(first)
        memory = Memory(
            account_id=first.account_id,
            observed_at=first.observed_at,
            history_at=first.observed_at,
            state_fp=state_fingerprint(first, rules.digests),
            track=track,
        )
        decisions.append(Decision(first, latest=True, history=True, position=track is not None))
    heartbeat, min_move_m, digests = rules.heartbeat, rules.min_move_m, rules.digests
    # The ints of the UUIDs: a UUID's ``__eq__`` is a Python call.
    account = memory.account_id.int
    observed_at, history_at, state_fp, track = (
        memory.observed_at,
        memory.history_at,
        memory.state_fp,
        memory.track,
    )
    advanced = reasserted = False
    for state in remaining:
        if state.account_id.int != account:
            decisions.append(Decision(state, drop="account-mismatch-stored"))
            continue
        at = state.observed_at
        if at == observed_at:
            decisions.append(Decision(state, drop="duplicate"))
            continue
        fp = state_fingerprint(state, digests)
        changed = fp != state_fp
        position = moved(track, state, min_move_m)
        if at < observed_at:
            decisions.append(Decision(state, history=changed, position=position, reassert=changed))
            reasserted = reasserted or changed
            continue
        history = changed or history_at is None or at - history_at >= heartbeat
        decisions.append(Decision(state, latest=True, history=history, position=position))
        observed_at, state_fp, advanced = at, fp, True
        if history:
            history_at = at
        if position:
            track = _track(state)
    if reasserted:
        # The latest state gets its history row again (whichever state is latest when
        # the batch is written: a newer one of this batch included).
        history_at = observed_at
    if advanced or reasserted:
        memory = Memory(
            account_id=memory.account_id,
            observed_at=observed_at,
            history_at=history_at,
            state_fp=state_fp,
            track=track,
        )
    return decisions, memory
