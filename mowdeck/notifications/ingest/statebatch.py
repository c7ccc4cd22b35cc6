"""The transaction of one batch of states: lock, check the actors' watches, write.

The watch actors evaluated the batch against the watches they hold. One transaction
then locks every watch of the batch FOR UPDATE in mower id order, reading only each
row's ``Stamp`` (version and observed_at), not its document. A mower whose stamp is the
one this replica last committed or saw for its actor's watch is known to be held as
stored; only the others have their documents read (still in the same transaction, on
rows already locked) and compared with what their actor evaluated against, and where
they differ (another replica, the offline scan or a link event wrote it meanwhile), the
mower's states are planned again on the stored watch.

Then the writes: a mower whose states only moved its contact (a heartbeat: nothing
sent, nothing suppressed, the watch the same but for ``observed_at`` and
``contact_at``) is *touched*, its two contact columns written, its document and version
left alone; every other changed watch is written whole, as a new version. Both happen
under the row lock taken at the start, so the guarantee of the issue holds for each:
read FOR UPDATE in the transaction that writes it. docs/notifications.md, "Heartbeats",
says why a touched heartbeat is safe.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from contracts.v1 import MowerState
from mowdeck.notifications.ingest.actor import WatchAnswer, evaluate
from mowdeck.notifications.ingest.model import Stamp
from mowdeck.notifications.ingest.plan import Place, Plan, contact_only
from mowdeck.notifications.ingest.ports import WatchStore, WatchTransaction
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.watch import MowerWatch

__all__ = ["BatchResult", "StateBatchWriter"]

log = structlog.get_logger("mowdeck.notifications.ingest.statebatch")
_uuid_int = operator.attrgetter("int")


@dataclass(slots=True)
class BatchResult:
    """What a committed batch wrote: whole watches and events (``plan``), touched
    watches, and the watches of mowers planned again (their actors adopt them)."""

    plan: Plan = field(default_factory=Plan)
    touched: list[MowerWatch] = field(default_factory=list)
    replanned: dict[uuid.UUID, MowerWatch | None] = field(default_factory=dict)
    stamps: dict[uuid.UUID, Stamp] = field(default_factory=dict)


class StateBatchWriter:
    """Commits state batches; remembers, per mower, the stamp its actor's watch has."""

    def __init__(
        self, store: WatchStore, thresholds: Thresholds, place: Place | None = None
    ) -> None:
        self._store = store
        self._thresholds = thresholds
        self._place = place
        # The stamp under which this replica's actor holds the stored watch. An entry is
        # made by a commit whose watch the actor evaluated, and dropped whenever that may
        # no longer be so (the batch failed, the actor (re)started or adopted a watch).
        self._stamps: dict[uuid.UUID, Stamp] = {}

    def forget(self, mower_ids: Sequence[uuid.UUID]) -> None:
        """Their actors may not hold the stored watches: read them on the next batch."""
        for mower_id in mower_ids:
            self._stamps.pop(mower_id, None)

    async def commit(
        self,
        answers: Mapping[uuid.UUID, WatchAnswer],
        states: Mapping[uuid.UUID, Sequence[MowerState]],
        now: datetime,
        consuming_since: datetime | None,
    ) -> BatchResult:
        """Lock, check, plan again where needed, write, commit: one transaction (the actor
        batch tries it again after a lost race, and forgets its mowers when it fails)."""
        async with self._store.watches() as tx:
            result = await self._run(tx, answers, states, now, consuming_since)
        self._stamps.update(result.stamps)
        self.forget(list(result.replanned))
        return result

    async def _run(
        self,
        tx: WatchTransaction,
        answers: Mapping[uuid.UUID, WatchAnswer],
        states: Mapping[uuid.UUID, Sequence[MowerState]],
        now: datetime,
        since: datetime | None,
    ) -> BatchResult:
        stamps = await tx.lock_versions(sorted(answers, key=_uuid_int))
        unsure = _unsure(answers, stamps, self._stamps)
        stored = await tx.lock(unsure) if unsure else {}
        planned_again = set(unsure)  # looked up per mower; a list would compare each
        result = BatchResult()
        plan = result.plan
        for mower_id, answer in answers.items():
            stamp, base, part = stamps.get(mower_id), answer.base, answer.plan
            touch = answer.contact_only
            if planned_again and mower_id in planned_again:
                watch = stored.get(mower_id)
                if watch != base:
                    base = watch
                    part = evaluate(
                        watch,
                        states=states[mower_id],
                        now=now,
                        consuming_since=since,
                        thresholds=self._thresholds,
                        place=self._place,
                    )
                    touch = contact_only(watch, part)
                    result.replanned[mower_id] = part.writes[-1].watch if part.writes else watch
            if touch:
                after = part.writes[-1].watch
                result.touched.append(after)
                if stamp is not None:
                    result.stamps[mower_id] = Stamp(stamp.version, after.observed_at)
            else:
                plan.writes.extend(part.writes)
                if part.writes:
                    version = 0 if stamp is None else stamp.version + 1
                    result.stamps[mower_id] = Stamp(version, part.writes[-1].watch.observed_at)
                elif stamp is not None:
                    result.stamps[mower_id] = stamp
            plan.events.extend(part.events)
            plan.suppressed.extend(part.suppressed)
            plan.alarms.extend(part.alarms)
            for reason, count in part.ignored.items():
                plan.ignored[reason] = plan.ignored.get(reason, 0) + count
        await tx.touch(result.touched)
        await tx.write(plan.writes, plan.events, plan.alarms)
        return result


def _unsure(
    answers: Mapping[uuid.UUID, WatchAnswer],
    stamps: Mapping[uuid.UUID, Stamp],
    known: Mapping[uuid.UUID, Stamp],
) -> list[uuid.UUID]:
    """The mowers whose actors may have evaluated against another watch than the stored."""
    unsure: list[uuid.UUID] = []
    for mower_id, answer in answers.items():
        stamp, base = stamps.get(mower_id), answer.base
        if stamp is None:
            if base is not None:
                unsure.append(mower_id)  # gone meanwhile: plan again on nothing
        elif base is None or known.get(mower_id) != stamp or stamp.observed_at != base.observed_at:
            unsure.append(mower_id)
    return unsure
