"""Scheduling states of an actor's inbox, shared by the inbox and the dispatcher.

Only the dispatcher (and a put that finds the actor idle) changes them, under the
dispatcher's lock; a normal put reads them without. The READY_* and RUNNING values must
stay contiguous: `TwoLaneInbox.put` tests them as one range.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEAD", "IDLE", "NEW", "READY_EMERGENCY", "READY_NORMAL", "RUNNING"]

NEW: Final = 0  # created, actor not started yet: mail is kept, nothing is scheduled
IDLE: Final = 1  # started, no mail, not queued
READY_NORMAL: Final = 2  # queued in the dispatcher's normal ready queue
READY_EMERGENCY: Final = 3  # queued in the emergency ready queue
RUNNING: Final = 4  # a worker is running this actor's turn
DEAD: Final = 5  # torn down: puts are answered with ActorDeadError
