"""A batch of TELEMETRY deliveries sorted into each mower's states, as the ingests take it.

Telemetry's ingest and Notifications' state batcher both read the whole TELEMETRY
stream (a filter narrower than the stream's subjects costs JetStream about twice the CPU
per delivery) and handle a batch mower by mower. ``StateSorter.sort`` does the part they
share: a delivery on any other subject is set apart (``foreign``: acknowledged unread),
one that does not decode, or whose state names another mower than its subject, is
rejected with its reason, and the rest are grouped by mower in arrival order. A service
adds checks of its own (``check``) after those.

Keys are compared by the UUIDs' ints: a ``uuid.UUID``'s ``__hash__`` and ``__eq__`` are
Python calls, and this runs for every state. A subject's mower id is remembered (bounded,
so junk subjects cannot grow the memory for ever): parsing a UUID per message was a
measurable share of the hot path.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nats.aio.msg import Msg

from contracts.v1 import ContractError, MowerState, decode_state
from contracts.v1.subjects import TELEMETRY_PREFIX, mower_id_from_subject

__all__ = ["MowerStates", "Rejected", "SortedStates", "StateCheck", "StateSorter"]

SUBJECT_CACHE = 100_000

StateCheck = Callable[[MowerState, bytes], "tuple[str, str] | None"]
"""A service's own check of a decoded state (and its payload): ``(reason, detail)`` to
reject it, None to keep it."""


@dataclass(slots=True)
class MowerStates:
    """One mower's deliveries of a batch and their states, in arrival order."""

    msgs: list[Msg] = field(default_factory=list)
    states: list[MowerState] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A delivery that is no state to handle: why (a metric label) and what was wrong."""

    msg: Msg
    reason: str
    detail: str


@dataclass(slots=True)
class SortedStates:
    """A batch sorted: states by mower, the rejected, and deliveries of other subjects."""

    mowers: dict[uuid.UUID, MowerStates] = field(default_factory=dict)
    rejected: list[Rejected] = field(default_factory=list)
    foreign: list[Msg] = field(default_factory=list)


class StateSorter:
    """Sorts batches of TELEMETRY deliveries; remembers subjects' mowers and actor keys."""

    def __init__(self, *, subject_cache: int = SUBJECT_CACHE) -> None:
        self._subjects: dict[str, int] = {}
        self._subject_cache = subject_cache
        self._keys: dict[uuid.UUID, str] = {}

    def sort(self, msgs: Sequence[Msg], check: StateCheck | None = None) -> SortedStates:
        """``msgs`` sorted: malformed (``malformed``), a state of another mower than its
        subject's (``subject-mismatch``), then what ``check`` rejects."""
        out = SortedStates()
        mowers, rejected, foreign = out.mowers, out.rejected, out.foreign
        subjects = self._subjects
        groups: dict[int, MowerStates] = {}
        for msg in msgs:
            data = msg.data
            try:
                subject_mower = subjects.get(msg.subject)
                if subject_mower is None:
                    subject_mower = self._subject_mower(msg.subject)
                    if subject_mower is None:
                        foreign.append(msg)
                        continue
                state = decode_state(data)
            except ContractError as err:
                rejected.append(Rejected(msg, "malformed", str(err)))
                continue
            mower_id = state.mower_id
            key = mower_id.int
            if key != subject_mower:
                rejected.append(Rejected(msg, "subject-mismatch", str(mower_id)))
                continue
            if check is not None and (refused := check(state, data)) is not None:
                rejected.append(Rejected(msg, *refused))
                continue
            entry = groups.get(key)
            if entry is None:
                entry = groups[key] = mowers[mower_id] = MowerStates()
            entry.msgs.append(msg)
            entry.states.append(state)
        return out

    def key(self, mower_id: uuid.UUID) -> str:
        """The supervisor's key of the mower's actor (its id as text, made once)."""
        key = self._keys.get(mower_id)
        if key is None:
            key = self._keys[mower_id] = str(mower_id)
        return key

    def _subject_mower(self, subject: str) -> int | None:
        # None: not a telemetry.mower.<token> subject at all.
        if not subject.startswith(TELEMETRY_PREFIX) or "." in subject[len(TELEMETRY_PREFIX) :]:
            return None
        mower_id = mower_id_from_subject(subject).int
        if len(self._subjects) < self._subject_cache:
            self._subjects[subject] = mower_id
        return mower_id
