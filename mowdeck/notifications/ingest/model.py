"""What the watch store writes and answers: a watch with its next scan, a locked row's stamp."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["Stamp", "WatchWrite"]


class Stamp(NamedTuple):
    """What a locked watch row says of the document without reading it: the number of
    its writes, and the time of the newest state applied."""

    version: int
    observed_at: datetime


@dataclass(frozen=True, slots=True)
class WatchWrite:
    """A watch to store, with when the offline scan should look at it next.

    ``silence_due_at`` is ``rules.silence_due(watch, ...)``. Written by a state batch it
    only ever moves the stored time earlier; written back by the scan that claimed the
    watch it is stored as given (see ``WatchTransaction.write``). ``changed`` False: the
    watch is the stored one (a scan that found nothing), only the due time is new.
    """

    watch: MowerWatch
    silence_due_at: datetime | None
    changed: bool = True
