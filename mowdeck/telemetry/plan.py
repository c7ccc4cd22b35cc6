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
from mowdeck.telemetry.actor import FingerprintAnswer
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
    outcomes: dict[uuid.UUID, FingerprintAnswer],
    stored: dict[uuid.UUID, Memory],
    directory: dict[uuid.UUID, uuid.UUID],
    rules: Rules,
) -> tuple[Plan, dict[uuid.UUID, dict[int, str]]]:
    """Turn actor outcomes into a write batch, re-deciding mowers whose stored row moved."""
    plan = Plan()
    batch = plan.batch
    drops: dict[uuid.UUID, dict[int, str]] = {}
    # Looked up and compared by the UUIDs' ints: a uuid.UUID's ``__hash__`` and ``__eq__``
    # are Python calls, and these run per mower and per state.
    accounts = {mower_id.int: account.int for mower_id, account in directory.items()}
    memories = {mower_id.int: memory for mower_id, memory in stored.items()}
    for mower_id, outcome in outcomes.items():
        mower_states = states[mower_id]
        dropped = _foreign(mower_states, accounts.get(mower_id.int))
        decisions, memory = outcome.decisions, outcome.memory
        base = memories.get(mower_id.int)
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
        reassert = False
        for i, decision in enumerate(decisions):
            if decision.drop is not None:
                if decision.drop != "duplicate":
                    dropped[i] = decision.drop
                continue
            if decision.latest and memory is not None:
                newest = (decision.state, memory)
            if decision.history:
                batch.history.append(decision.state)
            if decision.position:
                batch.positions.append(decision.state)
            reassert = reassert or decision.reassert
        if newest is not None:
            batch.latest.append(newest)
        if reassert:
            batch.reassert.append(mower_id)
        plan.decisions.extend(decisions)
        if dropped:
            drops[mower_id] = dropped
    return plan, drops


def _foreign(states: Sequence[MowerState], account: int | None) -> dict[int, str]:
    """The indexes of the states of another account than the directory's (as an int)."""
    dropped: dict[int, str] = {}
    if account is not None:
        for i, state in enumerate(states):
            if state.account_id.int != account:
                dropped[i] = "account-mismatch-directory"
    return dropped
