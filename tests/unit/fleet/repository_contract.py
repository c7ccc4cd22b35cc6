"""One contract for every ``MowerRepository``/``CommandLog``/``Pruning``; adapters' test
modules import it.

A test module provides ``repo``, ``command_log`` and ``pruning`` (over those two) fixtures
and star-imports the tests.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contracts.v1 import CommandResult, Connection, MowerRegistration
from mowdeck.fleet.errors import (
    MowerExistsError,
    MowerNotFoundError,
    UnstorableError,
    VersionConflictError,
)
from mowdeck.fleet.ports import CommandRecord, MowerRecord, PruneCutoffs
from mowdeck.fleet.rules import outbox_event

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _reg(name: str = "M", **options: Any) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name=name,
        connection=Connection(kind="simulator", options=options),
    )


async def _add(repo: Any, reg: MowerRegistration) -> MowerRecord:
    record = MowerRecord(reg, NOW, NOW)
    await repo.add(record, outbox_event("mower.registered", reg, now=NOW))
    return record


async def test_contract_add_get_and_taken_ids(repo: Any) -> None:
    reg = _reg(port=7001, nested={"a": [1, 2]})
    await _add(repo, reg)
    got = await repo.get(reg.mower_id)
    assert got is not None
    assert (got.registration, got.version, got.created_at) == (reg, 1, NOW)
    assert await repo.get(uuid.uuid4()) is None
    with pytest.raises(MowerExistsError):
        await _add(repo, reg)
    assert (await repo.outbox_stats()).pending == 1


async def test_contract_get_many_sorts_by_name(repo: Any) -> None:
    b, a = _reg("b"), _reg("a")
    await _add(repo, b)
    await _add(repo, a)
    found = await repo.get_many([b.mower_id, a.mower_id, uuid.uuid4()])
    assert [r.registration.name for r in found] == ["a", "b"]
    assert {r.mower_id for r in await repo.all_registrations()} >= {a.mower_id, b.mower_id}


async def test_contract_update_and_remove_check_the_version(repo: Any) -> None:
    reg = _reg()
    await _add(repo, reg)
    renamed = MowerRecord(
        MowerRegistration(
            mower_id=reg.mower_id, account_id=reg.account_id, name="R", connection=reg.connection
        ),
        NOW,
        NOW + timedelta(seconds=1),
        2,
    )
    event = outbox_event("mower.updated", renamed.registration, now=NOW)
    await repo.update(renamed, event, expected_version=1)
    with pytest.raises(VersionConflictError):
        await repo.update(renamed, outbox_event("mower.updated", reg, now=NOW), expected_version=1)
    got = await repo.get(reg.mower_id)
    assert (got.registration.name, got.version) == ("R", 2)
    removed = outbox_event("mower.removed", renamed.registration, now=NOW)
    with pytest.raises(VersionConflictError):
        await repo.remove(reg.mower_id, removed, expected_version=1)
    await repo.remove(reg.mower_id, removed, expected_version=2)
    assert await repo.get(reg.mower_id) is None
    with pytest.raises(MowerNotFoundError):
        await repo.remove(reg.mower_id, removed, expected_version=2)
    assert (await repo.outbox_stats()).pending == 3  # failed changes left no event


async def test_contract_outbox_claims_in_order_and_marks_only_what_was_published(
    repo: Any,
) -> None:
    regs = [_reg(f"m{i}") for i in range(5)]
    for reg in regs:
        await _add(repo, reg)
    async with repo.claim_outbox(3) as claim:
        assert claim is not None
        assert len(claim.events) == 3
        # A second relay meanwhile gets nothing.
        async with repo.claim_outbox(3) as other:
            assert other is None
        claim.published.extend(e.event_id for e in claim.events[:2])
    assert (await repo.outbox_stats()).pending == 3

    async def crash() -> None:
        async with repo.claim_outbox(10) as claim:
            claim.published.extend(e.event_id for e in claim.events)
            raise RuntimeError("crash before marking")

    with pytest.raises(RuntimeError):
        await crash()
    stats = await repo.outbox_stats()
    assert stats.pending == 3
    async with repo.claim_outbox(10) as claim:
        names = [e.body.split(b'"name":"')[1].split(b'"')[0] for e in claim.events]
        assert names == [b"m2", b"m3", b"m4"]
        claim.published.extend(e.event_id for e in claim.events)
    assert (await repo.outbox_stats()).pending == 0


async def test_contract_command_log_is_idempotent_and_ordered(command_log: Any) -> None:
    mower, command_id = uuid.uuid4(), uuid.uuid4()
    record = CommandRecord(command_id, mower, uuid.uuid4(), "pause_mow", "user:a", NOW, NOW)
    results = [
        CommandResult(
            command_id=command_id, mower_id=mower, status="executed", at=NOW + timedelta(seconds=2)
        ),
        CommandResult(
            command_id=command_id, mower_id=mower, status="accepted", at=NOW + timedelta(seconds=1)
        ),
    ]
    assert await command_log.lookup(command_id) == (None, [])
    await command_log.record([], results)  # results may come before the command
    await command_log.record([record], results)
    await command_log.record([record], [])
    found, statuses = await command_log.lookup(command_id)
    assert found == record
    assert [s.status for s in statuses] == ["accepted", "executed"]


async def test_contract_a_result_the_store_refuses_is_unstorable_and_fails_its_batch(
    command_log: Any,
) -> None:
    mower = uuid.uuid4()
    good, bad = (
        CommandResult(
            command_id=uuid.uuid4(), mower_id=mower, status="failed", at=NOW, reason=reason
        )
        for reason in ("blade jammed", "jam\u0000med")
    )
    with pytest.raises(UnstorableError):
        await command_log.record([], [good, bad])
    assert await command_log.lookup(good.command_id) == (None, [])  # nothing of the batch
    await command_log.record([], [good])
    assert [s.reason for s in (await command_log.lookup(good.command_id))[1]] == ["blade jammed"]


async def test_contract_events_set_aside_are_kept_but_never_claimed_again(repo: Any) -> None:
    regs = [_reg(f"s{i}") for i in range(3)]
    for reg in regs:
        await _add(repo, reg)
    async with repo.claim_outbox(10) as claim:
        first, poison, last = claim.events
        claim.published.extend([first.event_id, last.event_id])
        claim.failed[poison.event_id] = "larger than the bus's max_payload"
    stats = await repo.outbox_stats()
    assert (stats.pending, stats.oldest, stats.set_aside) == (0, None, 1)
    async with repo.claim_outbox(10) as claim:
        assert claim.events == []

    async def crash() -> None:
        async with repo.claim_outbox(10) as claim:
            claim.failed.update({e.event_id: "x" for e in claim.events})
            raise RuntimeError("crash before marking")

    await _add(repo, _reg("s3"))
    with pytest.raises(RuntimeError):
        await crash()
    assert (await repo.outbox_stats()).pending == 1  # nothing set aside on a crash


async def test_contract_pruning_deletes_old_published_events_and_old_commands_only(
    repo: Any, command_log: Any, pruning: Any
) -> None:
    for reg in [_reg(f"p{i}") for i in range(3)]:
        await _add(repo, reg)
    async with repo.claim_outbox(2) as claim:
        claim.published.extend(e.event_id for e in claim.events)
    mower, week_ago = uuid.uuid4(), NOW - timedelta(days=7)
    old = CommandRecord(uuid.uuid4(), mower, uuid.uuid4(), "pause_mow", "user:a", *[week_ago] * 2)
    new = CommandRecord(uuid.uuid4(), mower, old.account_id, "start_mow", "user:a", NOW, NOW)
    await command_log.record(
        [old, new],
        [
            CommandResult(
                command_id=c.command_id, mower_id=mower, status="executed", at=c.issued_at
            )
            for c in (old, new)
        ],
    )
    published_before = datetime.now(UTC) - timedelta(hours=1)  # before any publication
    deleted = await pruning.prune(PruneCutoffs(published_before, NOW - timedelta(days=1)), 1)
    assert deleted["fleet_outbox"] == 0
    assert deleted["fleet_commands"] >= 1
    assert deleted["fleet_command_statuses"] >= 1
    assert await command_log.lookup(old.command_id) == (None, [])
    found, statuses = await command_log.lookup(new.command_id)
    assert (found, [s.status for s in statuses]) == (new, ["executed"])

    later = datetime.now(UTC) + timedelta(seconds=5)  # after both publications
    deleted = await pruning.prune(PruneCutoffs(later, NOW - timedelta(days=1)), 1)
    assert deleted["fleet_outbox"] == 2
    # The unpublished event is still owed, however old.
    assert (await repo.outbox_stats()).pending == 1
    async with repo.claim_outbox(10) as claim:
        assert [e.body.split(b'"name":"')[1][:2] for e in claim.events] == [b"p2"]
