"""What an ingest batch writes: actor outcomes checked against the locked rows.

Pure: takes the batch's states, the actors' outcomes, the stored memories and directory
entries read inside the transaction, and the rules; returns the writes, the messages to
terminate and the memories the actors must adopt.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from contracts.v1 import MowerState
from mowdeck.telemetry.actor import Outcome
from mowdeck.telemetry.fingerprint import Decision, Rules, decide_all
from mowdeck.telemetry.model import Memory
from mowdeck.telemetry.ports import WriteBatch

__all__ = ["Plan", "plan_batch"]


@dataclass(slots=True)
class Plan:
    """What a batch writes, which messages are terminated, and memories to correct."""

    batch: WriteBatch = field(default_factory=WriteBatch)
    drops: dict[int, str] = field(default_factory=dict)  # index within the mower -> reason
    adopt: dict[uuid.UUID, Memory | None] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)


def plan_batch(
    states: Mapping[uuid.UUID, Sequence[MowerState]],
    outcomes: dict[uuid.UUID, Outcome],
    stored: dict[uuid.UUID, Memory],
    directory: dict[uuid.UUID, uuid.UUID],
    rules: Rules,
) -> tuple[Plan, dict[uuid.UUID, dict[int, str]]]:
    """Turn actor outcomes into a write batch, re-deciding mowers whose stored row moved."""
    plan = Plan()
    drops: dict[uuid.UUID, dict[int, str]] = {}
    for mower_id, outcome in outcomes.items():
        mower_states = states[mower_id]
        account = directory.get(mower_id)
        dropped = {
            i: "account-mismatch-directory"
            for i, s in enumerate(mower_states)
            if account is not None and s.account_id != account
        }
        decisions, memory = outcome.decisions, outcome.memory
        base = stored.get(mower_id)
        if dropped or base != outcome.base:
            kept = [s for i, s in enumerate(mower_states) if i not in dropped]
            decisions, memory = decide_all(base, kept, rules)
            plan.adopt[mower_id] = memory
            # Re-align the decisions with the mower's message indexes.
            it = iter(decisions)
            decisions = [
                Decision(s, drop=dropped[i]) if i in dropped else next(it)
                for i, s in enumerate(mower_states)
            ]
        newest: tuple[MowerState, Memory] | None = None
        for i, decision in enumerate(decisions):
            if decision.drop is not None:
                if decision.drop != "duplicate":
                    dropped[i] = decision.drop
                continue
            if decision.latest and memory is not None:
                newest = (decision.state, memory)
            if decision.history:
                plan.batch.history.append(decision.state)
            if decision.position:
                plan.batch.positions.append(decision.state)
        if newest is not None:
            plan.batch.latest.append(newest)
        plan.decisions.extend(decisions)
        if dropped:
            drops[mower_id] = dropped
    return plan, drops
