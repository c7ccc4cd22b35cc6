"""One contract for every ``MowerRepository``/``CommandLog``/``Pruning``; adapters' test
modules import it.

A test module provides ``repo``, ``command_log``, ``audit_trail`` (over the command log)
and ``pruning`` (over those) fixtures and star-imports the tests.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from contracts.v1 import CommandResult, Connection, MowerRegistration
from mowdeck.fleet.errors import (
    EndpointTakenError,
    MowerExistsError,
    MowerNotFoundError,
    UnstorableError,
    VersionConflictError,
)
from mowdeck.fleet.ports import (
    UNANSWERED_REASON,
    AuditQuery,
    CommandRecord,
    EndpointClash,
    MowerRecord,
    PruneCutoffs,
)
from mowdeck.fleet.rules import registry_event

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
    await repo.add(record, registry_event("mower.registered", reg, now=NOW))
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
    assert (await repo.relay_stats()).pending == 1


async def test_contract_get_many_sorts_by_name(repo: Any) -> None:
    b, a = _reg("b"), _reg("a")
    await _add(repo, b)
    await _add(repo, a)
    found = await repo.get_many([b.mower_id, a.mower_id, uuid.uuid4()])
    assert [r.registration.name for r in found] == ["a", "b"]
    assert {r.mower_id for r in await repo.all_registrations()} >= {a.mower_id, b.mower_id}


async def test_contract_a_page_of_an_account_starts_behind_its_keyset_position(
    repo: Any,
) -> None:
    account = uuid.uuid4()
    regs = [
        msgspec.structs.replace(_reg(name), account_id=account) for name in ["b", "a", "b", "c"]
    ]
    stranger = _reg("a")
    for reg in [*regs, stranger]:
        await _add(repo, reg)
    ids = [r.mower_id for r in [*regs, stranger]]
    order = sorted(regs, key=lambda r: (r.name, r.mower_id))
    first = await repo.page_of_account(account, ids, None, 2)
    assert [r.registration for r in first] == order[:2]
    last = first[-1].registration
    rest = await repo.page_of_account(account, ids, (last.name, last.mower_id), 10)
    assert [r.registration for r in rest] == order[2:]
    assert await repo.page_of_account(account, ids[:1], None, 10) == [await repo.get(ids[0])]


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
    event = registry_event("mower.updated", renamed.registration, now=NOW)
    await repo.update(renamed, event, expected_version=1)
    with pytest.raises(VersionConflictError):
        await repo.update(
            renamed, registry_event("mower.updated", reg, now=NOW), expected_version=1
        )
    got = await repo.get(reg.mower_id)
    assert (got.registration.name, got.version) == ("R", 2)
    removed = registry_event("mower.removed", renamed.registration, now=NOW)
    with pytest.raises(VersionConflictError):
        await repo.remove(reg.mower_id, removed, expected_version=1)
    await repo.remove(reg.mower_id, removed, expected_version=2)
    assert await repo.get(reg.mower_id) is None
    with pytest.raises(MowerNotFoundError):
        await repo.remove(reg.mower_id, removed, expected_version=2)
    assert (await repo.relay_stats()).pending == 3  # failed changes left no event


def _device(key: str | None, at: datetime = NOW, name: str = "M") -> MowerRecord:
    # A mower whose connection names device ``key``; the record holds it as its endpoint.
    options = {"device": key} if key is not None else {}
    return MowerRecord(_reg(name, **options), at, at, endpoint_key=key)


def _key_of(connection: Connection) -> str | None:
    device = connection.options.get("device")
    return device if isinstance(device, str) else None


async def _store(repo: Any, record: MowerRecord) -> MowerRecord:
    await repo.add(record, registry_event("mower.registered", record.registration, now=NOW))
    return record


async def _change(repo: Any, record: MowerRecord, key: str | None, name: str = "M") -> MowerRecord:
    options = {"device": key} if key is not None else {}
    reg = msgspec.structs.replace(
        record.registration,
        name=name,
        connection=Connection(kind="simulator", options=options),
    )
    changed = MowerRecord(reg, record.created_at, NOW, record.version + 1, endpoint_key=key)
    await repo.update(changed, registry_event("mower.updated", reg, now=NOW), record.version)
    return changed


async def test_contract_a_device_endpoint_belongs_to_one_mower(repo: Any) -> None:
    key, other_key = f"k:{uuid.uuid4()}", f"k:{uuid.uuid4()}"
    holder = await _store(repo, _device(key))
    second = _device(key)
    with pytest.raises(EndpointTakenError):
        await _store(repo, second)
    assert await repo.get(second.registration.mower_id) is None
    # Moving another mower onto it is refused too, and changes nothing.
    mover = await _store(repo, _device(other_key))
    with pytest.raises(EndpointTakenError):
        await _change(repo, mover, key)
    got = await repo.get(mover.registration.mower_id)
    assert (got.version, got.endpoint_key) == (1, other_key)
    # A change keeping its own endpoint is fine.
    holder = await _change(repo, holder, key, name="renamed")
    assert (await repo.get(holder.registration.mower_id)).endpoint_key == key
    assert (await repo.relay_stats()).pending == 3  # the refused changes left no event
    # Moving away frees the old endpoint; removing a mower frees its endpoint.
    mover = await _change(repo, mover, f"k:{uuid.uuid4()}")
    await _store(repo, _device(other_key))
    removed = registry_event("mower.removed", holder.registration, now=NOW)
    await repo.remove(holder.registration.mower_id, removed, expected_version=holder.version)
    await _store(repo, second)
    assert (await repo.get(second.registration.mower_id)).endpoint_key == key


async def test_contract_racing_registrations_of_one_endpoint_have_one_winner(repo: Any) -> None:
    key = f"k:{uuid.uuid4()}"
    racers = [_device(key) for _ in range(6)]
    outcomes = await asyncio.gather(*(_store(repo, r) for r in racers), return_exceptions=True)
    won = [r for r, outcome in zip(racers, outcomes, strict=True) if outcome is r]
    assert len(won) == 1
    assert all(isinstance(o, EndpointTakenError) for o in outcomes if o is not won[0])
    found = await repo.get_many([r.registration.mower_id for r in racers])
    assert [f.registration.mower_id for f in found] == [won[0].registration.mower_id]


async def test_contract_keys_stored_later_go_to_the_earliest_registration(repo: Any) -> None:
    # Mowers stored before keys were kept (a device, no key): two share a device, one
    # names a device another mower holds already.
    shared, free, held = (f"k:{uuid.uuid4()}" for _ in range(3))
    holder = await _store(repo, _device(held))
    second_ = timedelta(seconds=1)

    def stored_before(device: str, at: datetime) -> MowerRecord:
        return MowerRecord(_reg(device=device), at, at)

    first = await _store(repo, stored_before(shared, NOW + second_))
    second = await _store(repo, stored_before(shared, NOW + 2 * second_))
    other = await _store(repo, stored_before(free, NOW + 3 * second_))
    late = await _store(repo, stored_before(held, NOW))
    first_id, second_id, other_id, late_id = (
        r.registration.mower_id for r in (first, second, other, late)
    )
    before = (await repo.relay_stats()).pending

    def updated(reg: MowerRegistration) -> Any:
        return registry_event("mower.updated", reg, now=NOW)

    clashes = await repo.assign_endpoint_keys(_key_of, updated)
    mine = {first_id, second_id, other_id, late_id}
    assert {c for c in clashes if c.mower_id in mine} == {
        EndpointClash(second_id, first_id),
        EndpointClash(late_id, holder.registration.mower_id),
    }
    assert (await repo.get(first_id)).endpoint_key == shared
    assert (await repo.get(other_id)).endpoint_key == free
    assert (await repo.get(second_id)).endpoint_key is None
    listed = {r.mower_id for r in await repo.all_registrations()}
    assert {first_id, other_id} <= listed
    assert not {second_id, late_id} & listed
    assert (await repo.relay_stats()).pending == before  # nobody became linkable
    # Once the holder is gone, the next call gives the waiting mower its endpoint, and an
    # event tells the gateways of it.
    gone = registry_event("mower.removed", first.registration, now=NOW)
    await repo.remove(first_id, gone, expected_version=1)
    again = await repo.assign_endpoint_keys(_key_of, updated)
    assert second_id not in {c.mower_id for c in again}
    assert late_id in {c.mower_id for c in again}
    assert (await repo.get(second_id)).endpoint_key == shared
    assert second_id in {r.mower_id for r in await repo.all_registrations()}
    assert (await repo.relay_stats()).pending == before + 2  # the removal, the update
    # A change of its own gives a mower left without its endpoint a free one.
    stuck = await repo.get(late_id)
    await _change(repo, stuck, f"k:{uuid.uuid4()}")
    assert late_id in {r.mower_id for r in await repo.all_registrations()}


async def test_contract_unpublished_events_are_claimed_in_order_and_marks_only_what_was_published(
    repo: Any,
) -> None:
    regs = [_reg(f"m{i}") for i in range(5)]
    for reg in regs:
        await _add(repo, reg)
    async with repo.claim_unpublished(3) as claim:
        assert claim is not None
        assert len(claim.events) == 3
        # A second relay meanwhile gets nothing.
        async with repo.claim_unpublished(3) as other:
            assert other is None
        claim.published.extend(e.event_id for e in claim.events[:2])
    assert (await repo.relay_stats()).pending == 3

    async def crash() -> None:
        async with repo.claim_unpublished(10) as claim:
            claim.published.extend(e.event_id for e in claim.events)
            raise RuntimeError("crash before marking")

    with pytest.raises(RuntimeError):
        await crash()
    stats = await repo.relay_stats()
    assert stats.pending == 3
    async with repo.claim_unpublished(10) as claim:
        names = [e.body.split(b'"name":"')[1].split(b'"')[0] for e in claim.events]
        assert names == [b"m2", b"m3", b"m4"]
        claim.published.extend(e.event_id for e in claim.events)
    assert (await repo.relay_stats()).pending == 0


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
    async with repo.claim_unpublished(10) as claim:
        first, poison, last = claim.events
        claim.published.extend([first.event_id, last.event_id])
        claim.failed[poison.event_id] = "larger than the bus's max_payload"
    stats = await repo.relay_stats()
    assert (stats.pending, stats.oldest, stats.set_aside) == (0, None, 1)
    async with repo.claim_unpublished(10) as claim:
        assert claim.events == []

    async def crash() -> None:
        async with repo.claim_unpublished(10) as claim:
            claim.failed.update({e.event_id: "x" for e in claim.events})
            raise RuntimeError("crash before marking")

    await _add(repo, _reg("s3"))
    with pytest.raises(RuntimeError):
        await crash()
    assert (await repo.relay_stats()).pending == 1  # nothing set aside on a crash


async def test_contract_pruning_deletes_old_published_events_and_old_commands_only(
    repo: Any, command_log: Any, pruning: Any
) -> None:
    for reg in [_reg(f"p{i}") for i in range(3)]:
        await _add(repo, reg)
    async with repo.claim_unpublished(2) as claim:
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
    assert (await repo.relay_stats()).pending == 1
    async with repo.claim_unpublished(10) as claim:
        assert [e.body.split(b'"name":"')[1][:2] for e in claim.events] == [b"p2"]


def _command(
    account: uuid.UUID, *, issued: datetime = NOW, kind: str = "pause_mow", ttl_s: float = 30
) -> CommandRecord:
    return CommandRecord(
        uuid.uuid4(),
        uuid.uuid4(),
        account,
        kind,
        "user:a",
        issued,
        issued + timedelta(seconds=ttl_s),
        command=f'{{"kind":"{kind}"}}',
    )


def _result(command: CommandRecord, status: str, at: datetime) -> CommandResult:
    return CommandResult(
        command_id=command.command_id, mower_id=command.mower_id, status=status, at=at
    )  # type: ignore[arg-type]


async def test_contract_overdue_commands_are_finalized_once_and_only_without_a_final_status(
    command_log: Any, audit_trail: Any
) -> None:
    account = uuid.uuid4()
    lost, answered, recent = (
        _command(account, issued=NOW - timedelta(minutes=m)) for m in (9, 8, 0)
    )
    await command_log.record([lost, answered, recent], [])
    await command_log.record([], [_result(answered, "executed", NOW - timedelta(minutes=7))])
    cutoff = NOW - timedelta(seconds=30)  # expiry plus a 30 s grace
    failed = await command_log.finalize_overdue(cutoff, at=NOW, limit=100)
    assert [(r.command_id, r.status, r.reason) for r in failed] == [
        (lost.command_id, "failed", UNANSWERED_REASON)
    ]
    assert await command_log.finalize_overdue(cutoff, at=NOW, limit=100) == []
    _, statuses = await command_log.lookup(lost.command_id)
    assert [(s.status, s.reason) for s in statuses] == [("failed", UNANSWERED_REASON)]
    assert [s.status for s in (await command_log.lookup(answered.command_id))[1]] == ["executed"]
    assert (await command_log.lookup(recent.command_id))[1] == []
    # A late true result is appended: the record keeps both, the trail says who said what.
    await command_log.record([], [_result(lost, "executed", NOW + timedelta(seconds=5))])
    _, statuses = await command_log.lookup(lost.command_id)
    assert [s.status for s in statuses] == ["failed", "executed"]
    (entry,) = [
        e for e in await audit_trail.page(AuditQuery(account)) if e.command_id == lost.command_id
    ]
    assert [(s.status, s.source) for s in entry.statuses] == [
        ("failed", "fleet"),
        ("executed", "gateway"),
    ]


async def test_contract_a_command_keeps_the_first_final_status_the_gateway_reported(
    command_log: Any, audit_trail: Any
) -> None:
    # A restore whose database is newer than its stream (docs/operations.md) redelivers
    # a command the database holds as executed; past its expiry by then, it is answered
    # ``expired``. The mower carried it out: the first final status of the gateway stands.
    account = uuid.uuid4()
    command = _command(account)
    later = NOW + timedelta(seconds=40)
    await command_log.record([command], [_result(command, "executed", NOW)])
    await command_log.record([], [_result(command, "expired", later)])
    await command_log.record([], [_result(command, "executed", NOW)])  # a repeat: no change
    _, statuses = await command_log.lookup(command.command_id)
    assert [s.status for s in statuses] == ["executed"]
    (entry,) = await audit_trail.page(AuditQuery(account))
    assert [(s.status, s.source) for s in entry.statuses] == [("executed", "gateway")]


async def test_contract_settle_finalizes_one_overdue_command_or_reads_its_final_status(
    command_log: Any,
) -> None:
    account = uuid.uuid4()
    lost, answered, recent = (
        _command(account, issued=NOW - timedelta(minutes=m)) for m in (9, 8, 0)
    )
    await command_log.record([lost, answered, recent], [])
    await command_log.record([], [_result(answered, "rejected", NOW - timedelta(minutes=7))])
    cutoff = NOW - timedelta(seconds=30)
    settled = await command_log.settle(lost.command_id, cutoff, at=NOW)
    assert settled is not None
    assert (settled.status, settled.reason, settled.at) == ("failed", UNANSWERED_REASON, NOW)
    settled = await command_log.settle(answered.command_id, cutoff, at=NOW)
    assert settled is not None
    assert settled.status == "rejected"
    assert await command_log.settle(recent.command_id, cutoff, at=NOW) is None
    assert (await command_log.lookup(recent.command_id))[1] == []
    # The rounds find nothing left of what was settled.
    failed = await command_log.finalize_overdue(cutoff, at=NOW, limit=100)
    assert lost.command_id not in {r.command_id for r in failed}


async def test_contract_the_audit_trail_pages_an_accounts_commands_newest_first(
    command_log: Any, audit_trail: Any
) -> None:
    account = uuid.uuid4()
    commands = [
        _command(account, issued=NOW - timedelta(hours=h), kind=kind)
        for h, kind in enumerate(["pause_mow", "emergency_stop", "start_mow", "emergency_stop"])
    ]
    other_account = _command(uuid.uuid4())
    await command_log.record([*commands, other_account], [])
    await command_log.record(
        [],
        [
            _result(commands[1], "accepted", NOW),
            _result(commands[1], "executed", NOW + timedelta(seconds=1)),
        ],
    )
    entries = await audit_trail.page(AuditQuery(account))
    assert [e.command_id for e in entries] == [c.command_id for c in commands]
    assert msgspec.json.decode(entries[1].command) == {"kind": "emergency_stop"}
    assert [(s.status, s.source) for s in entries[1].statuses] == [
        ("accepted", "gateway"),
        ("executed", "gateway"),
    ]
    stops = await audit_trail.page(AuditQuery(account, kind="emergency_stop"))
    assert [e.command_id for e in stops] == [commands[1].command_id, commands[3].command_id]
    first = await audit_trail.page(AuditQuery(account, limit=2))
    last = first[-1]
    rest = await audit_trail.page(
        AuditQuery(account, limit=2, before=(last.issued_at, last.command_id))
    )
    assert [e.command_id for e in first + rest] == [c.command_id for c in commands]
    window = await audit_trail.page(
        AuditQuery(account, since=NOW - timedelta(hours=2), until=NOW - timedelta(hours=1))
    )
    assert [e.command_id for e in window] == [commands[2].command_id]
    one = await audit_trail.page(AuditQuery(account, mower_id=commands[3].mower_id))
    assert [e.command_id for e in one] == [commands[3].command_id]
    # A site member's trail: only the mowers named, none when none is.
    some = (commands[0].mower_id, commands[2].mower_id, other_account.mower_id)
    scoped = await audit_trail.page(AuditQuery(account, mower_ids=some))
    assert [e.command_id for e in scoped] == [commands[0].command_id, commands[2].command_id]
    assert await audit_trail.page(AuditQuery(account, mower_ids=())) == []


async def test_contract_the_audit_trail_outlives_the_working_set_until_its_own_retention(
    command_log: Any, audit_trail: Any, pruning: Any
) -> None:
    account = uuid.uuid4()
    month_old = _command(account, issued=NOW - timedelta(days=30))
    await command_log.record([month_old], [_result(month_old, "executed", month_old.issued_at)])
    week = NOW - timedelta(days=7)
    await pruning.prune(PruneCutoffs(NOW, week, NOW - timedelta(days=400)), 100)
    assert await command_log.lookup(month_old.command_id) == (None, [])
    (kept,) = await audit_trail.page(AuditQuery(account))
    assert [s.status for s in kept.statuses] == ["executed"]
    await pruning.prune(PruneCutoffs(NOW, week), 100)  # no audit cutoff: the trail stays
    assert len(await audit_trail.page(AuditQuery(account))) == 1
    deleted = await pruning.prune(PruneCutoffs(NOW, week, NOW - timedelta(days=29)), 100)
    assert deleted["fleet_audit_commands"] >= 1
    assert deleted["fleet_audit_statuses"] >= 1
    assert await audit_trail.page(AuditQuery(account)) == []
