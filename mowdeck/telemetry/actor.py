"""The fingerprint actor: one per mower, holding its memory and deciding what each state writes.

It does no I/O. The batcher sends it a mower's states of one batch (``Decide``); it
answers through a ``DecisionSink`` (``actors.AnswerSink``) that wakes the loop once when
every mower of the batch has answered. After the commit the batcher may correct its
memory (``Adopt``), and after a failed commit the actor is stopped so it restarts from
the stored row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import pykka

from actors import (
    ActorFactory,
    AnswerSink,
    Dispatcher,
    DispatcherActor,
    PrefetchedSnapshots,
    Snapshot,
    snapshots_by_id,
)
from contracts.v1 import MowerState
from mowdeck.telemetry.fingerprint import Decision, Rules, decide_all
from mowdeck.telemetry.model import Memory
from mowdeck.telemetry.ports import TelemetryStore

__all__ = [
    "Adopt",
    "Decide",
    "DecisionSink",
    "FingerprintActor",
    "FingerprintAnswer",
    "LatestRowSnapshots",
    "actor_factory",
]

_memory_codec = msgspec.json.Encoder()
_memory_decoder = msgspec.json.Decoder(Memory)


class FingerprintAnswer(msgspec.Struct, frozen=True):
    """A mower's answer: the memory it decided against, the decisions, the memory after."""

    # FingerprintAnswer and Decide are Structs rather than frozen dataclasses: one of each is made
    # per mower and batch, and a frozen dataclass pays an ``object.__setattr__`` per field.

    base: Memory | None
    decisions: list[Decision]
    memory: Memory | None


DecisionSink = AnswerSink[uuid.UUID, FingerprintAnswer]
"""Where the actors of one batch deliver their answers (``actors.AnswerSink``)."""


class Decide(msgspec.Struct, frozen=True):
    """Decide the writes of a mower's states, in order."""

    states: Sequence[MowerState]
    sink: DecisionSink


@dataclass(frozen=True, slots=True)
class Adopt:
    """Replace the memory with what was committed."""

    memory: Memory | None


class FingerprintActor(DispatcherActor):
    """Holds one mower's latest-row memory and applies the storage rules to its states."""

    def __init__(
        self, *, dispatcher: Dispatcher, mower_id: uuid.UUID, memory: Memory | None, rules: Rules
    ) -> None:
        super().__init__(dispatcher=dispatcher)
        self.mower_id = mower_id
        self.memory = memory
        self.rules = rules

    def on_receive(self, message: Any) -> Any:
        """Handle ``Decide`` and ``Adopt``."""
        if isinstance(message, Decide):
            base = self.memory
            try:
                decisions, memory = decide_all(base, message.states, self.rules)
            except Exception:
                message.sink.deliver(self.mower_id, None)
                raise
            self.memory = memory
            message.sink.deliver(self.mower_id, FingerprintAnswer(base, decisions, memory))
            return None
        if isinstance(message, Adopt):
            self.memory = message.memory
            return None
        return super().on_receive(message)


class LatestRowSnapshots(PrefetchedSnapshots):
    """Snapshots read from ``mower_latest``: the row is written with each batch, never here.

    ``prefetch`` (of ``actors.PrefetchedSnapshots``) loads the memories of many mowers in
    one query before their actors start.
    """

    def __init__(self, store: TelemetryStore) -> None:
        super().__init__(snapshots_by_id(store.memories, _memory_codec.encode))


def actor_factory(dispatcher: Dispatcher, rules: Rules) -> ActorFactory:
    """The supervisor's factory: a ``FingerprintActor`` from the mower's snapshot."""

    def factory(key: str, snapshot: Snapshot | None) -> pykka.ActorRef[Any]:
        memory = None if snapshot is None else _memory_decoder.decode(snapshot.state)
        return FingerprintActor.start(
            dispatcher=dispatcher, mower_id=uuid.UUID(key), memory=memory, rules=rules
        )

    return factory
