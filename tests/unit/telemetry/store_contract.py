"""One contract for every ``TelemetryStore``: subclass ``StoreContract`` and give a ``store``."""

from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec

from contracts.v1 import MowerState, Position
from mowdeck.telemetry.bins import downsample, parse_step
from mowdeck.telemetry.fingerprint import state_fingerprint
from mowdeck.telemetry.model import Memory, TimelineRow, TrackPoint
from mowdeck.telemetry.ports import Cutoffs, TelemetryStore, WriteBatch, WriteCounts
from tests.unit.telemetry.samples import ACCOUNT, MOWER, OTHER_ACCOUNT, T0, at, state

FAR = T0 + timedelta(days=1)
OTHER_MOWER = uuid.UUID("00000000-0000-4000-8000-000000000002")


def memory_of(s: MowerState) -> Memory:
    """The memory a state leaves when everything of it was written."""
    track = None if s.position is None else TrackPoint(s.position.lat, s.position.lon, s.rtk_fix)
    return Memory(
        account_id=s.account_id,
        observed_at=s.observed_at,
        history_at=s.observed_at,
        state_fp=state_fingerprint(s),
        track=track,
    )


async def write(
    store: TelemetryStore,
    latest: list[MowerState] = (),  # type: ignore[assignment]
    history: list[MowerState] = (),  # type: ignore[assignment]
    positions: list[MowerState] = (),  # type: ignore[assignment]
) -> WriteCounts:
    """Write one batch."""
    async with store.state_writer() as tx:
        await tx.lock(sorted({s.mower_id for s in [*latest, *history, *positions]}))
        return await tx.write(
            WriteBatch(
                latest=[(s, memory_of(s)) for s in latest],
                history=list(history),
                positions=list(positions),
            )
        )


def result(command: int, status: str, seconds: float, mower: uuid.UUID = MOWER) -> TimelineRow:
    """A timeline row."""
    return TimelineRow(
        command_id=uuid.UUID(int=command),
        status=status,
        mower_id=mower,
        account_id=ACCOUNT,
        at=at(seconds),
        reason=None,
        kind="start_mow",
    )


class StoreContract:
    """Behaviour every adapter shares."""

    async def test_latest_round_trips_the_state_and_memory(self, store: TelemetryStore) -> None:
        s = state(0, raw={"fw": "1.2"}, blade_height_mm=40, speed_mps=0.5, error_code="E1")
        counts = await write(store, latest=[s])
        assert counts.latest == 1
        assert await store.latest(ACCOUNT, MOWER) == s
        assert await store.memories([MOWER, OTHER_MOWER]) == {MOWER: memory_of(s)}

    async def test_latest_round_trips_every_field_exactly(self, store: TelemetryStore) -> None:
        # The values a text or JSON encoding could bend: microseconds, floats that need
        # all their digits, quotes, backslashes and characters beyond the BMP, nested raw.
        s = msgspec.structs.replace(
            state(
                0.000123,
                lat=-33.868819999999996,
                lon=151.20929000000001,
                rtk_source='ntrip "base" \\ 7',
                connection="lte/5G \u2013 ok",
                blade_height_mm=0,
                speed_mps=0.1 + 0.2,
                error_code="E\u00e9\U0001f600\\n",
                charging=True,
                raw={"fw": "1.2", "n": [1, 2.5, None, True], "big": 2**62, "o": {"k": "v"}},
            ),
            position=Position(lat=-33.868819999999996, lon=151.20929000000001, heading_deg=359.999),
        )
        await write(store, latest=[s])
        assert await store.latest(ACCOUNT, MOWER) == s

    async def test_older_state_never_overwrites_newer(self, store: TelemetryStore) -> None:
        await write(store, latest=[state(10, battery=50)])
        counts = await write(store, latest=[state(5, battery=99)])
        assert counts.latest == 0
        latest = await store.latest(ACCOUNT, MOWER)
        assert latest is not None
        assert latest.battery == 50

    async def test_reassert_appends_the_latest_state_to_the_history(
        self, store: TelemetryStore
    ) -> None:
        await write(store, latest=[state(0)], history=[state(0)])
        await write(store, latest=[state(20, battery=70)])  # a heartbeat-like skip
        # An older state with other values comes late: its row, then the latest again.
        async with store.state_writer() as tx:
            await tx.lock([MOWER])
            counts = await tx.write(WriteBatch(history=[state(10, battery=10)], reassert=[MOWER]))
        assert counts.history == 2
        rows = await store.history(ACCOUNT, MOWER, at(0), at(60), 10)
        assert [(r.observed_at, r.battery) for r in rows] == [
            (at(0), 80),
            (at(10), 10),
            (at(20), 70),
        ]
        memory = (await store.memories([MOWER]))[MOWER]
        assert memory.history_at == at(20)
        # Again (a redelivery): the row is there once.
        async with store.state_writer() as tx:
            await tx.lock([MOWER])
            counts = await tx.write(WriteBatch(reassert=[MOWER]))
        assert counts.history == 0

    async def test_latest_of_another_account_is_neither_read_nor_overwritten(
        self, store: TelemetryStore
    ) -> None:
        await write(store, latest=[state(0)])
        assert await store.latest(OTHER_ACCOUNT, MOWER) is None
        counts = await write(store, latest=[state(10, account_id=OTHER_ACCOUNT)])
        assert counts.latest == 0
        latest = await store.latest(ACCOUNT, MOWER)
        assert latest is not None
        assert latest.account_id == ACCOUNT

    async def test_latest_of_account_filters(self, store: TelemetryStore) -> None:
        foreign = uuid.UUID(int=99)
        await write(
            store,
            latest=[
                state(0),
                state(0, mower_id=OTHER_MOWER),
                state(0, mower_id=foreign, account_id=OTHER_ACCOUNT),
            ],
        )
        everything = await store.latest_of_account(ACCOUNT, None)
        assert [s.mower_id for s in everything] == [MOWER, OTHER_MOWER]
        some = await store.latest_of_account(ACCOUNT, {OTHER_MOWER, foreign})
        assert [s.mower_id for s in some] == [OTHER_MOWER]
        first = await store.latest_of_account(ACCOUNT, None, limit=1)
        assert [s.mower_id for s in first] == [MOWER]
        rest = await store.latest_of_account(ACCOUNT, None, after=MOWER, limit=5)
        assert [s.mower_id for s in rest] == [OTHER_MOWER]
        behind = await store.latest_of_account(ACCOUNT, {MOWER, OTHER_MOWER}, after=MOWER)
        assert [s.mower_id for s in behind] == [OTHER_MOWER]

    async def test_history_and_track_are_append_only_and_deduplicated(
        self, store: TelemetryStore
    ) -> None:
        states = [state(i, battery=80 - i, lat=52.5 + i / 1000) for i in range(3)]
        first = await write(store, history=states, positions=states)
        again = await write(store, history=states, positions=[*states, state(9, lat=None)])
        assert (first.history, first.positions) == (3, 3)
        assert (again.history, again.positions) == (0, 0)
        rows = await store.history(ACCOUNT, MOWER, T0, FAR, 10)
        assert [r.battery for r in rows] == [80, 79, 78]
        points = await store.track(ACCOUNT, MOWER, T0, FAR, 2)
        assert [p.lat for p in points] == [52.5, 52.501]

    async def test_ranges_are_half_open_and_account_scoped(self, store: TelemetryStore) -> None:
        states = [state(i) for i in range(5)]
        await write(store, history=states, positions=states)
        assert len(await store.history(ACCOUNT, MOWER, at(1), at(3), 10)) == 2
        assert len(await store.track(ACCOUNT, MOWER, at(1), at(3), 10)) == 2
        assert await store.history(OTHER_ACCOUNT, MOWER, T0, FAR, 10) == []
        assert await store.track(OTHER_ACCOUNT, MOWER, T0, FAR, 10) == []

    async def test_history_bins_match_the_pure_helper(self, store: TelemetryStore) -> None:
        states = [
            state(
                i * 1.5,
                battery=90 - i,
                charging=i == 3,
                activity="mowing" if i < 5 else "paused",
                error_code="E7" if i == 6 else None,
                lat=52.5 + i / 10_000,
            )
            for i in range(12)
        ]
        await write(store, history=states, positions=states[::2])
        step = parse_step("5s")
        bins = await store.history_bins(ACCOUNT, MOWER, at(1), FAR, step)
        rows = await store.history(ACCOUNT, MOWER, at(1), FAR, 100)
        track = await store.track(ACCOUNT, MOWER, at(1), FAR, 100)
        assert bins == downsample(rows, track, step)
        assert [b.bin for b in bins] == [at(0), at(5), at(10), at(15)]
        assert [b.samples for b in bins] == [3, 3, 3, 2]
        assert [(b.battery_min, b.battery_max, b.battery) for b in bins] == [
            (87, 89, 88),
            (84, 86, 85),
            (81, 83, 82),
            (79, 80, 80),  # 79.5 rounds half up, as PostgreSQL's round(numeric)
        ]
        assert [b.charging for b in bins] == [True, False, False, False]
        assert [b.activity for b in bins] == ["mowing", "paused", "paused", "paused"]
        assert [b.error_code for b in bins] == [None, "E7", None, None]
        assert [b.position.lat if b.position else None for b in bins] == [
            52.5002,
            52.5006,
            52.5008,
            52.501,
        ]

    async def test_directory_events_win_over_the_seed(self, store: TelemetryStore) -> None:
        assert await store.directory_account(MOWER) is None
        await store.seed_directory([(MOWER, OTHER_ACCOUNT)])
        assert await store.directory_account(MOWER) == OTHER_ACCOUNT
        assert await store.register_mower(MOWER, ACCOUNT, at(10))
        await store.seed_directory([(MOWER, OTHER_ACCOUNT), (OTHER_MOWER, ACCOUNT)])
        assert await store.directory_account(MOWER) == ACCOUNT
        assert await store.directory_account(OTHER_MOWER) == ACCOUNT
        assert not await store.register_mower(MOWER, OTHER_ACCOUNT, at(5))
        assert await store.directory_account(MOWER) == ACCOUNT

    async def test_removal_tombstone_keeps_a_late_seed_out(self, store: TelemetryStore) -> None:
        await store.register_mower(MOWER, ACCOUNT, at(0))
        await store.remove_mower(MOWER, at(10))
        await store.seed_directory([(MOWER, ACCOUNT)])
        assert await store.directory_account(MOWER) is None
        assert await store.register_mower(MOWER, ACCOUNT, at(20))
        assert await store.directory_account(MOWER) == ACCOUNT

    async def test_removal_purges_everything_about_the_mower(self, store: TelemetryStore) -> None:
        mine, other = state(0), state(0, mower_id=OTHER_MOWER)
        await write(store, latest=[mine, other], history=[mine, other], positions=[mine, other])
        await store.add_timeline(result(1, "accepted", 0))
        await store.add_timeline(result(2, "accepted", 0, mower=OTHER_MOWER))
        deleted = await store.remove_mower(MOWER, at(5))
        assert deleted == 4
        assert await store.latest(ACCOUNT, MOWER) is None
        assert await store.history(ACCOUNT, MOWER, T0, FAR, 10) == []
        assert await store.track(ACCOUNT, MOWER, T0, FAR, 10) == []
        assert await store.timeline(ACCOUNT, MOWER, T0, FAR, 10) == []
        assert await store.memories([MOWER]) == {}
        assert await store.latest(ACCOUNT, OTHER_MOWER) is not None
        assert len(await store.timeline(ACCOUNT, OTHER_MOWER, T0, FAR, 10)) == 1

    async def test_a_late_removal_leaves_a_newer_registration_alone(
        self, store: TelemetryStore
    ) -> None:
        # Removed at 5, registered again at 100 and reporting; the removal comes again
        # (redelivered, or late on another replica): the new registration keeps its rows.
        await store.register_mower(MOWER, ACCOUNT, at(0))
        await store.remove_mower(MOWER, at(5))
        assert await store.register_mower(MOWER, ACCOUNT, at(100))
        mine = state(110)
        await write(store, latest=[mine], history=[mine], positions=[mine])
        await store.add_timeline(result(1, "accepted", 110))
        assert await store.remove_mower(MOWER, at(5)) == 0
        assert await store.directory_account(MOWER) == ACCOUNT
        assert await store.latest(ACCOUNT, MOWER) == mine
        assert len(await store.history(ACCOUNT, MOWER, T0, FAR, 10)) == 1
        assert len(await store.track(ACCOUNT, MOWER, T0, FAR, 10)) == 1
        assert len(await store.timeline(ACCOUNT, MOWER, T0, FAR, 10)) == 1
        # A removal newer than the registration purges as before.
        assert await store.remove_mower(MOWER, at(200)) == 4
        assert await store.latest(ACCOUNT, MOWER) is None

    async def test_an_id_registered_again_after_its_removal_starts_clean(
        self, store: TelemetryStore
    ) -> None:
        # A late state of the removed mower was stored after the purge; the id then goes
        # to another account, whose states must not be held off by that row.
        await store.register_mower(MOWER, ACCOUNT, at(0))
        await store.remove_mower(MOWER, at(5))
        late = state(6)
        await write(store, latest=[late], history=[late], positions=[late])
        assert await store.register_mower(MOWER, OTHER_ACCOUNT, at(100))
        assert await store.memories([MOWER]) == {}
        assert await store.latest(ACCOUNT, MOWER) is None
        assert await store.history(ACCOUNT, MOWER, T0, FAR, 10) == []
        assert await store.directory_account(MOWER) == OTHER_ACCOUNT
        # An update of a live registration keeps what is stored.
        mine = state(110, account_id=OTHER_ACCOUNT)
        await write(store, latest=[mine])
        assert await store.register_mower(MOWER, OTHER_ACCOUNT, at(120))
        assert await store.latest(OTHER_ACCOUNT, MOWER) == mine

    async def test_timeline_one_row_per_transition(self, store: TelemetryStore) -> None:
        assert await store.add_timeline(result(1, "accepted", 0))
        assert not await store.add_timeline(result(1, "accepted", 0))
        assert await store.add_timeline(result(1, "executed", 3))
        assert await store.add_timeline(result(2, "rejected", 1))
        rows = await store.timeline(ACCOUNT, MOWER, T0, FAR, 10)
        assert [(r.command_id.int, r.status) for r in rows] == [
            (1, "accepted"),
            (2, "rejected"),
            (1, "executed"),
        ]
        assert {r.kind for r in rows} == {"start_mow"}
        assert await store.timeline(OTHER_ACCOUNT, MOWER, T0, FAR, 10) == []
        assert len(await store.timeline(ACCOUNT, MOWER, T0, FAR, 2)) == 2

    async def test_retention_deletes_only_old_rows(self, store: TelemetryStore) -> None:
        states = [state(i * 86400) for i in range(5)]  # days 0..4
        await write(store, history=states, positions=states)
        for day in range(5):
            await store.add_timeline(result(day, "accepted", day * 86400))
        cutoffs = Cutoffs(
            history=at(2 * 86400),
            positions=at(86400),
            timeline=at(3 * 86400),
            tombstones=at(0),
        )
        deleted = await store.retention_round(cutoffs, 1)
        assert deleted == {
            "mower_history": 2,
            "mower_positions": 1,
            "command_timeline": 3,
            "mower_directory": 0,
        }
        assert len(await store.history(ACCOUNT, MOWER, T0, at(10 * 86400), 10)) == 3
        assert len(await store.track(ACCOUNT, MOWER, T0, at(10 * 86400), 10)) == 4
        assert len(await store.timeline(ACCOUNT, MOWER, T0, at(10 * 86400), 10)) == 2

    async def test_retention_drops_old_tombstones_and_keeps_live_entries(
        self, store: TelemetryStore
    ) -> None:
        gone_long, gone_lately, live = uuid.UUID(int=901), uuid.UUID(int=902), uuid.UUID(int=903)
        for mower_id in (gone_long, gone_lately, live):
            assert await store.register_mower(mower_id, ACCOUNT, at(0))
        await store.remove_mower(gone_long, at(86400))
        await store.remove_mower(gone_lately, at(5 * 86400))
        cutoffs = Cutoffs(history=T0, positions=T0, timeline=T0, tombstones=at(3 * 86400))
        deleted = await store.retention_round(cutoffs, 1)
        assert deleted is not None
        assert deleted["mower_directory"] == 1
        # The old tombstone is gone: a seed may add the mower again. The recent one still
        # keeps a stale seed out, and the live entry (registered long ago) is untouched.
        assert await store.seed_directory([(gone_long, ACCOUNT), (gone_lately, ACCOUNT)]) == 1
        assert await store.directory_account(gone_long) == ACCOUNT
        assert await store.directory_account(gone_lately) is None
        assert await store.directory_account(live) == ACCOUNT
