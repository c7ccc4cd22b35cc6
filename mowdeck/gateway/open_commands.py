"""The commands each controller holds: told, and neither at the device nor answered yet.

A controller that fails (a bug) takes them with it: those in its queue, and the messages
still in its inbox. The gateway answers them instead of leaving them without a final
result (and a shutdown waiting for them); the answer, once stored, acknowledges their
deliveries. Giving them back instead would redeliver the command that made the
controller fail to its successor. A command whose send to the device has begun is not held here: its
outcome comes back as a message, and the restarted controller answers it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from contracts.v1 import CommandEnvelope
from mowdeck.gateway.actor import EmergencySubmit, Submit
from mowdeck.gateway.controller import Effect, PublishResult, SendToDevice, result_effect

__all__ = ["OpenCommands", "lost_effects"]


class OpenCommands:
    """Per controller key, the commands it holds, by id, in the order they were told."""

    def __init__(self) -> None:
        self._by_key: dict[str, dict[uuid.UUID, CommandEnvelope]] = {}

    def told(self, key: str, message: object) -> None:
        """A message is on its way to the controller of ``key``."""
        if isinstance(message, Submit) or (
            isinstance(message, EmergencySubmit) and not message.sent
        ):
            envelope = message.envelope
            # An expired command is answered `expired` by its controller, or, redelivered
            # long after it ran (the intake forgets ids five minutes after expiry),
            # ignored: answering it here too could give it a second final result.
            if envelope.is_expired(datetime.now(UTC)):
                return
            self._by_key.setdefault(key, {})[envelope.command_id] = envelope

    def performed(self, key: str, effects: Sequence[Effect]) -> None:
        """The controller's effects are being performed: what they settle is no longer held."""
        held = self._by_key.get(key)
        if not held:
            return
        for effect in effects:
            if isinstance(effect, PublishResult):
                if effect.result.is_final:
                    held.pop(effect.result.command_id, None)
            elif isinstance(effect, SendToDevice):
                held.pop(effect.envelope.command_id, None)
        if not held:
            del self._by_key[key]

    def take(self, key: str, keep: Iterable[uuid.UUID] = ()) -> list[CommandEnvelope]:
        """Forget and return what the controller of ``key`` held, but for ``keep``."""
        held = self._by_key.pop(key, None)
        if not held:
            return []
        kept = {cid: held.pop(cid) for cid in set(keep) if cid in held}
        if kept:
            self._by_key[key] = kept
        return list(held.values())

    def __len__(self) -> int:
        return sum(len(held) for held in self._by_key.values())


def lost_effects(lost: Sequence[CommandEnvelope], reason: str, now: datetime) -> list[Effect]:
    """What settles the commands a controller took with it.

    Ordinary commands get their final result, ``failed`` with ``reason``; a stop it never
    decided still goes to the device (its outcome reaches the successor).
    """
    effects: list[Effect] = []
    for envelope in lost:
        if envelope.is_emergency:
            effects += [result_effect(envelope, "accepted", now), SendToDevice(envelope)]
        else:
            effects.append(result_effect(envelope, "failed", now, reason))
    return effects
