"""One contract for every ``AlarmStore``: subclass ``AlarmContract``, give ``stores``.

Alarm changes reach a store the way the service writes them: in a watch transaction
(``tx.write(watches, events, alarms)``), committed with the watches.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

import msgspec

from mowdeck.notifications.alarms.audit import AuditQuery
from mowdeck.notifications.alarms.model import AlarmCursor, AlarmQuery
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.model import WatchWrite
from mowdeck.notifications.rules.events import AlarmChange, AlarmChangeKind
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, OTHER_MOWER, at
from tests.unit.notifications.stores import watch_of


def change(
    kind: AlarmChangeKind,
    condition: str = "battery_low",
    seconds: float = 0,
    *,
    mower_id: uuid.UUID = MOWER,
    account_id: uuid.UUID = ACCOUNT,
) -> AlarmChange:
    """A change of ``condition`` at ``T0 + seconds``."""
    alarm_kind = "mower_stuck" if condition.startswith("error:") else condition
    severity = {"mower_stuck": "critical", "battery_low": "warning"}.get(alarm_kind, "warning")
    return AlarmChange(
        change=kind,
        mower_id=mower_id,
        account_id=account_id,
        condition=condition,
        kind=alarm_kind,  # type: ignore[arg-type]
        severity=severity,  # type: ignore[arg-type]
        at=at(seconds),
        code=condition.removeprefix("error:") if condition.startswith("error:") else None,
        params={"battery": 12} if condition == "battery_low" else {},
    )


async def decide(stores: Stores, changes: Sequence[AlarmChange]) -> None:
    """Write ``changes`` in a watch transaction, as the ingest does."""
    mowers = sorted({c.mower_id for c in changes}, key=lambda m: m.int)
    async with stores.watches.watches() as tx:
        await tx.lock(mowers)
        writes = [WatchWrite(watch_of(m), at(120)) for m in mowers]
        await tx.write(writes, [], changes)


def query(**fields: object) -> AlarmQuery:
    return AlarmQuery(account_id=ACCOUNT, **fields)  # type: ignore[arg-type]


class AlarmContract:
    """Behaviour every adapter shares."""

    async def test_a_raised_alarm_is_listed_active(self, stores: Stores) -> None:
        await decide(stores, [change("raised", "error:E1", 10)])
        page = await stores.alarms.list_alarms(query(), None)
        [alarm] = page.items
        assert (alarm.mower_id, alarm.condition, alarm.kind, alarm.severity) == (
            MOWER,
            "error:E1",
            "mower_stuck",
            "critical",
        )
        assert (alarm.state, alarm.code, alarm.count) == ("active", "E1", 1)
        assert alarm.first_at == alarm.latest_at == at(10)
        assert page.next is None

    async def test_raising_an_open_condition_again_updates_it(self, stores: Stores) -> None:
        await decide(stores, [change("raised", seconds=10)])
        await decide(stores, [change("updated", seconds=50)])
        [alarm] = (await stores.alarms.list_alarms(query(), None)).items
        assert (alarm.count, alarm.first_at, alarm.latest_at) == (2, at(10), at(50))
        assert alarm.params == {"battery": 12}

    async def test_clearing_closes_it_and_a_new_raise_opens_another(self, stores: Stores) -> None:
        await decide(
            stores,
            [
                change("raised", seconds=10),
                change("cleared", seconds=20),
                change("raised", seconds=30),
            ],
        )
        everything = frozenset({"active", "acknowledged", "cleared"})
        items = (await stores.alarms.list_alarms(query(states=everything), None)).items
        assert [(a.state, a.latest_at) for a in items] == [("active", at(30)), ("cleared", at(10))]
        assert items[1].cleared_at == at(20)
        assert [a.state for a in (await stores.alarms.list_alarms(query(), None)).items] == [
            "active"
        ]

    async def test_a_batch_clears_and_raises_different_conditions(self, stores: Stores) -> None:
        await decide(stores, [change("raised", "error:E1", 1), change("raised", "battery_low", 2)])
        await decide(
            stores,
            [
                change("cleared", "error:E1", 10),
                change("raised", "mower_offline", 11),
                change("updated", "battery_low", 12),
            ],
        )
        everything = frozenset({"active", "acknowledged", "cleared"})
        items = (await stores.alarms.list_alarms(query(states=everything), None)).items
        found = {a.condition: (a.state, a.count, a.latest_at) for a in items}
        assert found == {
            "error:E1": ("cleared", 1, at(1)),
            "battery_low": ("active", 2, at(12)),
            "mower_offline": ("active", 1, at(11)),
        }

    async def test_clearing_what_is_not_open_changes_nothing(self, stores: Stores) -> None:
        await decide(stores, [change("cleared", seconds=20)])
        assert await stores.alarms.open_counts() == {}

    async def test_a_rolled_back_transaction_leaves_no_alarm(self, stores: Stores) -> None:
        try:
            async with stores.watches.watches() as tx:
                await tx.lock([MOWER])
                await tx.write([WatchWrite(watch_of(), at(120))], [], [change("raised")])
                raise RuntimeError("the batch failed after its write")
        except RuntimeError:
            pass
        assert (await stores.alarms.list_alarms(query(), None)).items == []

    async def test_listing_filters_by_account_mower_state_and_severity(
        self, stores: Stores
    ) -> None:
        await decide(
            stores,
            [
                change("raised", "battery_low", 1),
                change("raised", "error:E2", 2),
                change("raised", "battery_low", 3, mower_id=OTHER_MOWER),
                change(
                    "raised", "mower_offline", 4, mower_id=OTHER_MOWER, account_id=OTHER_ACCOUNT
                ),
            ],
        )
        alarms = stores.alarms
        assert len((await alarms.list_alarms(query(), None)).items) == 3
        mine = await alarms.list_alarms(query(mowers=frozenset({MOWER})), None)
        assert {a.condition for a in mine.items} == {"battery_low", "error:E2"}
        critical = await alarms.list_alarms(query(severity="critical"), None)
        assert [a.condition for a in critical.items] == ["error:E2"]
        nobody = await alarms.list_alarms(query(mowers=frozenset()), None)
        assert nobody.items == []

    async def test_listing_pages_newest_first_without_gaps(self, stores: Stores) -> None:
        await decide(stores, [change("raised", f"error:E{i}", i) for i in range(7)])
        seen: list[str] = []
        cursor: AlarmCursor | None = None
        while True:
            page = await stores.alarms.list_alarms(query(limit=3), cursor)
            seen += [a.condition for a in page.items]
            if page.next is None:
                break
            cursor = page.next
        assert seen == [f"error:E{i}" for i in reversed(range(7))]

    async def test_acknowledging_keeps_the_first_and_takes_a_new_comment(
        self, stores: Stores
    ) -> None:
        await decide(stores, [change("raised", seconds=10)])
        [alarm] = (await stores.alarms.list_alarms(query(), None)).items
        first = await stores.alarms.acknowledge(alarm, "erin", "on my way", at(60))
        assert (first.state, first.acknowledged_by, first.acknowledged_at, first.comment) == (
            "acknowledged",
            "erin",
            at(60),
            "on my way",
        )
        again = await stores.alarms.acknowledge(first, "frank", None, at(90))
        assert (again.acknowledged_by, again.acknowledged_at, again.comment) == (
            "erin",
            at(60),
            "on my way",
        )
        # Still open: a later clearing closes it, and it keeps who acknowledged it.
        await decide(stores, [change("cleared", seconds=120)])
        cleared = await stores.alarms.get_alarm(ACCOUNT, alarm.id)
        assert cleared is not None
        assert (cleared.state, cleared.acknowledged_by) == ("cleared", "erin")

    async def test_an_alarm_is_only_its_accounts(self, stores: Stores) -> None:
        await decide(stores, [change("raised")])
        [alarm] = (await stores.alarms.list_alarms(query(), None)).items
        assert await stores.alarms.get_alarm(OTHER_ACCOUNT, alarm.id) is None
        assert await stores.alarms.get_alarm(ACCOUNT, uuid.uuid4()) is None

    async def test_assigning(self, stores: Stores) -> None:
        await decide(stores, [change("raised")])
        [alarm] = (await stores.alarms.list_alarms(query(), None)).items
        assigned = await stores.alarms.assign(alarm, "frank", "erin", at(30))
        assert (assigned.assignee, assigned.assigned_by, assigned.assigned_at) == (
            "frank",
            "erin",
            at(30),
        )
        nobody = await stores.alarms.assign(assigned, None, "erin", at(40))
        assert nobody.assignee is None

    async def test_open_counts_and_pruning(self, stores: Stores) -> None:
        await decide(
            stores,
            [
                change("raised", "battery_low", 1),
                change("raised", "error:E1", 2),
                change("raised", "error:E2", 3, mower_id=OTHER_MOWER),
                change("cleared", "error:E2", 100, mower_id=OTHER_MOWER),
            ],
        )
        assert await stores.alarms.open_counts() == {
            ("battery_low", "warning"): 1,
            ("mower_stuck", "critical"): 1,
        }
        assert await stores.alarms.prune_cleared(at(100)) == 0  # cleared at 100, not before
        assert await stores.alarms.prune_cleared(at(101)) == 1
        everything = frozenset({"active", "acknowledged", "cleared"})
        assert len((await stores.alarms.list_alarms(query(states=everything), None)).items) == 2

    async def test_erasure_forgets_a_mower_and_a_users_name(self, stores: Stores) -> None:
        await decide(stores, [change("raised"), change("raised", mower_id=OTHER_MOWER)])
        items = (await stores.alarms.list_alarms(query(), None)).items
        for alarm in items:
            await stores.alarms.acknowledge(alarm, "erin", None, at(5))
        await stores.erasure.forget_mower(OTHER_MOWER)
        await stores.erasure.delete_user("erin")
        [left] = (await stores.alarms.list_alarms(query(), None)).items
        assert (left.mower_id, left.acknowledged_by, left.state) == (MOWER, None, "acknowledged")

    async def test_the_trail_holds_every_change_with_who_made_it(self, stores: Stores) -> None:
        await decide(stores, [change("raised", "error:E1", 10)])
        await decide(stores, [change("updated", "error:E1", 20)])
        [alarm] = (await stores.alarms.list_alarms(query(), None)).items
        await stores.alarms.acknowledge(alarm, "erin", "on my way", at(30))
        await stores.alarms.assign(alarm, "frank", "erin", at(40))
        await decide(stores, [change("cleared", "error:E1", 50)])
        trail = await stores.alarms.audit_page(AuditQuery(account_id=ACCOUNT))
        assert [(r.change, r.at, r.by, r.comment, r.assignee) for r in trail] == [
            ("cleared", at(50), None, None, None),
            ("assigned", at(40), "erin", None, "frank"),
            ("acknowledged", at(30), "erin", "on my way", None),
            ("updated", at(20), None, None, None),
            ("raised", at(10), None, None, None),
        ]
        assert {(r.alarm_id, r.mower_id, r.condition, r.code) for r in trail} == {
            (alarm.id, MOWER, "error:E1", "E1")
        }
        assert trail[0].seq > trail[-1].seq

    async def test_the_trail_filters_pages_and_is_only_its_accounts(self, stores: Stores) -> None:
        await decide(
            stores,
            [change("raised", f"error:E{i}", i) for i in range(5)]
            + [
                change("raised", "battery_low", 6, mower_id=OTHER_MOWER),
                change("raised", "battery_low", 7, mower_id=uuid.uuid4(), account_id=OTHER_ACCOUNT),
            ],
        )
        audit = stores.alarms.audit_page
        mine = AuditQuery(account_id=ACCOUNT)
        assert len(await audit(mine)) == 6
        other = await audit(msgspec.structs.replace(mine, mower_id=OTHER_MOWER))
        assert [r.condition for r in other] == ["battery_low"]
        assert await audit(msgspec.structs.replace(mine, change="cleared")) == []
        window = msgspec.structs.replace(mine, since=at(1), until=at(3))
        assert [r.condition for r in await audit(window)] == ["error:E2", "error:E1"]
        seen: list[str] = []
        page_query = msgspec.structs.replace(mine, limit=4)
        while True:
            page = await audit(page_query)
            seen += [r.condition for r in page]
            if len(page) < page_query.limit:
                break
            page_query = msgspec.structs.replace(page_query, before=page[-1].seq)
        assert seen == ["battery_low"] + [f"error:E{i}" for i in reversed(range(5))]

    async def test_the_trail_outlives_a_removed_mower_until_its_retention(
        self, stores: Stores
    ) -> None:
        await decide(stores, [change("raised", seconds=10), change("raised", "error:E1", 20)])
        await stores.erasure.forget_mower(MOWER)
        assert len(await stores.alarms.audit_page(AuditQuery(account_id=ACCOUNT))) == 2
        assert await stores.alarms.prune_audit(at(15)) == 1
        [left] = await stores.alarms.audit_page(AuditQuery(account_id=ACCOUNT))
        assert left.condition == "error:E1"

    async def test_escalation_takes_each_unacknowledged_critical_alarm_once(
        self, stores: Stores
    ) -> None:
        await decide(
            stores,
            [
                change("raised", "error:E1", 10),  # critical, due
                change("raised", "error:E2", 10, mower_id=OTHER_MOWER),  # acknowledged below
                change("raised", "error:E3", 100),  # critical, raised too late
                change("raised", "battery_low", 10),  # a warning: never escalated
            ],
        )
        alarms = stores.alarms
        page = await alarms.list_alarms(query(mowers=frozenset({OTHER_MOWER})), None)
        await alarms.acknowledge(page.items[0], "erin", None, at(20))
        escalated = await alarms.escalate(at(50), at(60), 100)
        assert [(a.condition, a.escalated_at) for a in escalated] == [("error:E1", at(60))]
        assert await alarms.escalate(at(50), at(70), 100) == []  # once
        claimed = await stores.pending.claim_pending(at(61), 100, timedelta(seconds=60))
        assert [
            (p.event.kind, p.event.mower_id, p.event.severity, p.event.params) for p in claimed
        ] == [("alarm_escalated", MOWER, "critical", {"condition": "error:E1", "open_seconds": 50})]
        trail = await alarms.audit_page(AuditQuery(account_id=ACCOUNT, change="escalated"))
        assert [(r.condition, r.at) for r in trail] == [("error:E1", at(60))]
        # A batch limit leaves the rest for the next call.
        await decide(stores, [change("raised", f"error:X{i}", 20 + i) for i in range(3)])
        assert len(await alarms.escalate(at(99), at(110), 2)) == 2
        assert len(await alarms.escalate(at(99), at(111), 2)) == 1
