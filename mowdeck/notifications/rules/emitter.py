"""The cooldown of the rules: one notification per kind and mower per cooldown.

``rules.py`` hands every due occurrence to an ``Emitter``, which sends it, holds it or
drops it, and reports what it held back.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from mowdeck.notifications.rules.alarms import alarm_changes
from mowdeck.notifications.rules.events import Outcome, Param, RuleEvent, Suppressed
from mowdeck.notifications.rules.kinds import SEVERITY, Kind
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["Emitter"]


class Emitter:
    """Collects one evaluation's events and suppressions, applying the cooldown."""

    def __init__(self, watch: MowerWatch, cooldown: timedelta, at: datetime) -> None:
        self.watch, self.cooldown, self.at = watch, cooldown, at
        # The watch's own dicts until the first change, then copies (``_own``): most
        # states change neither, and a watch's dicts are never changed in place.
        self.last_sent = watch.last_sent
        self.held = watch.held
        self._owned = False
        self.due: set[str] = set()
        self.events: list[RuleEvent] = []
        self.suppressed: list[Suppressed] = []

    def _own(self) -> None:
        if not self._owned:
            self.last_sent, self.held, self._owned = dict(self.last_sent), dict(self.held), True

    def _cooling(self, kind: Kind) -> bool:
        last = self.last_sent.get(kind)
        return last is not None and self.at - last < self.cooldown

    def _send(self, kind: Kind, key: str, message: str, params: dict[str, Param]) -> None:
        self._own()
        self.last_sent[kind] = self.at
        w = self.watch
        self.events.append(
            RuleEvent(
                kind=kind,
                mower_id=w.mower_id,
                account_id=w.account_id,
                severity=SEVERITY[kind],
                dedupe_key=key,
                message_key=message,
                params=params,
                occurred_at=self.at,
            )
        )

    def _suppress(self, kind: Kind, key: str) -> None:
        self.suppressed.append(
            Suppressed(
                kind=kind,
                mower_id=self.watch.mower_id,
                reason="cooldown",
                dedupe_key=key,
                at=self.at,
            )
        )

    def once(self, kind: Kind, key: str, message: str, params: dict[str, Param]) -> None:
        """An occurrence that happens once: sent now, or dropped by the cooldown."""
        if self._cooling(kind):
            self._suppress(kind, key)
        else:
            self._send(kind, key, message, params)

    def lasting(self, kind: Kind, key: str, message: str, params: dict[str, Param]) -> bool:
        """A condition that holds: sent now (True), or held until the cooldown is over."""
        self.due.add(kind)
        if self._cooling(kind):
            if self.held.get(kind) != key:
                self._own()
                self.held[kind] = key
                self._suppress(kind, key)
            return False
        if kind in self.held:
            self._own()
            del self.held[kind]
        self._send(kind, key, message, params)
        return True

    def settle(self, evaluated: tuple[Kind, ...]) -> tuple[dict[str, datetime], dict[str, str]]:
        """The cooldown memory after this evaluation: held kinds no longer due are let go."""
        for kind in evaluated:
            if kind not in self.due and kind in self.held:
                self._own()
                del self.held[kind]
        return self.last_sent, self.held

    def outcome(self, watch: MowerWatch) -> Outcome[MowerWatch]:
        """The outcome with ``watch`` as the new watch, its alarms decided."""
        if not self.events and not self.watch.alarms:  # most states: nothing to decide
            return Outcome(watch, self.events, self.suppressed)
        raised, alarms = alarm_changes(self.watch, watch, self.events, self.at)
        if raised is not watch.alarms:
            watch = msgspec.structs.replace(watch, alarms=raised)
        return Outcome(watch, self.events, self.suppressed, alarms=tuple(alarms))
