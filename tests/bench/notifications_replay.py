"""Notifications' state batcher alone: CPU (and instructions) per state at a batch size.

Run: python -m tests.bench.notifications_replay [--batch 500] [--rounds 11] [--smoke]
     [--geofence none|positions|areas] [--move METRES]

The benchmark's mix (``tests.bench.notifications.Fleet``: idle heartbeats 10 s apart,
about 1 % of them crossing the battery threshold) of ``--mowers`` mowers is handed to a
``StateBatcher`` as stand-in deliveries (``tests.support.fakes.FakeMsg``): the kit's
batching loop, the decoding, the watch actors on their dispatcher (``BatchAsk``), the
rules and the PostgreSQL transaction all run as in the service; NATS does not (the acks
are recorded) and neither does the fan-out (the pending events stay). The first round
starts the actors and is measured apart (``cold_cpu_us_per_state``). Every message is
queued before the loop runs, so each batch holds ``--batch`` states.

Under ``valgrind --tool=callgrind --instr-atstart=no`` with ``MOWDECK_BENCH_CALLGRIND=1``
the instruction count covers the measured rounds only; ``--profile FILE`` writes a
cProfile of the measured rounds (the loop's thread only). The collector is set up as
``mowdeck notifications`` sets it (young threshold, a freeze after the actors started);
``--python-gc`` keeps Python's defaults, to compare.

Geofences (issue #33): ``--geofence positions`` gives every state a position (each
mower at its own spot within 15 m of its site's centre, moving ``--move`` metres a round
in a random direction, kept within those 15 m); ``--geofence areas`` does the same and
puts every mower in a site (one per account) whose work area is a polygon of 50 vertices
(a 25 m circle), so the watch actors place every state against it. Compare ``areas``
with ``positions``: the difference is what point-in-polygon costs per state.
``--rules-only`` runs just the rules (``plan_states`` over the rounds, batches of
``--batch``, one thread, no actors and no database) and prints their states per second:
single-threaded, its instruction count under callgrind does not depend on how the
threads' timing cuts the states into batches, as the whole pipeline's does.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import random
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import msgspec
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1 import (
    Area,
    Connection,
    MowerRegistration,
    MowerState,
    Position,
    SiteAreas,
    encode,
)
from contracts.v1.subjects import telemetry_subject
from mowdeck.kit.garbage_collector import FREEZE_AFTER_STARTS, freeze, set_young_threshold
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.notifications.infra import Stores
from mowdeck.notifications.ingest.actor import WatchSnapshots, actor_factory
from mowdeck.notifications.ingest.geofences import Geofences
from mowdeck.notifications.ingest.plan import Place, plan_states
from mowdeck.notifications.ingest.states import StateBatcher
from mowdeck.notifications.metrics import NotificationsMetrics
from mowdeck.notifications.rules.evaluate import Thresholds
from mowdeck.notifications.rules.watch import MowerWatch
from mowdeck.notifications.settings import NotificationsSettings
from tests.bench.notifications import Fleet
from tests.bench.replay import callgrind, measure
from tests.support.fakes import FakeMsg
from tests.support.postgres import create_database, drop_database


@dataclass(frozen=True, slots=True)
class Options:
    """What to replay and how."""

    batch: int = 500
    rounds: int = 11
    mowers: int = 1000
    profile: str | None = None
    python_gc: bool = False
    geofence: str = "none"
    move: float = 0.0
    rules_only: bool = False


async def run(opts: Options) -> None:
    """Replay the mix as ``opts`` says; print the figures."""
    if not opts.python_gc:  # as `mowdeck notifications` does for its process
        set_young_threshold(NotificationsSettings().notifications_gc_young_threshold)
    url = await asyncio.to_thread(create_database, "mowdeck_bench_nreplay")
    try:
        await migrate(url, discover(sql_root(), ["notifications"]))
        pool = await asyncpg.create_pool(url, min_size=2, max_size=4)
        try:
            await _replay(pool, opts)
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(drop_database, url)


def rules_only(opts: Options) -> None:
    """The rules alone over the rounds, measured rounds only; print the RESULT."""
    fleet = Fleet(opts.mowers)
    place = _sites(fleet) if opts.geofence == "areas" else None
    walk = _Walk(fleet, opts.move) if opts.geofence != "none" else None
    rounds = [
        [walk.moved(s) if walk else s for s in fleet.next_round()[0]] for _ in range(opts.rounds)
    ]
    thresholds, watches = Thresholds(), dict[uuid.UUID, MowerWatch]()
    now = rounds[-1][0].observed_at + timedelta(seconds=1)

    def plan(states: list[MowerState]) -> None:
        for i in range(0, len(states), opts.batch):
            part = plan_states(watches, states[i : i + opts.batch], now, thresholds, place=place)
            for write in part.writes:
                watches[write.watch.mower_id] = write.watch

    plan(rounds[0])  # the first states start the watches: not measured
    measured = sum(len(r) for r in rounds[1:])
    gc.collect()
    callgrind(on=True)
    started = time.perf_counter()
    for states in rounds[1:]:
        plan(states)
    seconds = time.perf_counter() - started
    callgrind(on=False)
    print(
        f"RESULT rules_states_per_s={measured / seconds:.0f} states={measured}"
        f" us_per_state={seconds / measured * 1e6:.2f} geofence={opts.geofence}"
        f" move_m={opts.move}"
    )


async def _replay(pool: asyncpg.Pool, opts: Options) -> None:
    batch, rounds, mowers, profile = opts.batch, opts.rounds, opts.mowers, opts.profile
    stores = Stores.postgres(pool)
    thresholds = Thresholds()
    dispatcher = Dispatcher(workers=2, name="replay")
    dispatcher.start()
    snapshots = WatchSnapshots(stores.watches)
    fleet = Fleet(mowers)
    place = _sites(fleet) if opts.geofence == "areas" else None
    factory = actor_factory(dispatcher, thresholds, place)
    supervisor = ShardSupervisor(dispatcher, factory, snapshots)
    since = datetime.now(UTC)

    def started(count: int) -> None:
        if count >= FREEZE_AFTER_STARTS and not opts.python_gc:  # as `mowdeck notifications`
            freeze()

    batcher = StateBatcher(
        stores.watches,
        supervisor=supervisor,
        snapshots=snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        thresholds=thresholds,
        metrics=NotificationsMetrics(CollectorRegistry()),
        consuming_since=lambda: since,
        clock=lambda: datetime.now(UTC),
        on_events=lambda: None,
        batch_max=batch,
        linger=0.02,
        on_actors_started=started,
        place=place,
    )
    walk = _Walk(fleet, opts.move) if opts.geofence != "none" else None
    states = [walk.moved(s) if walk else s for _ in range(rounds) for s in fleet.next_round()[0]]
    msgs = [FakeMsg(encode(s), telemetry_subject(s.mower_id)) for s in states]
    warm, measured = msgs[:mowers], msgs[mowers:]
    try:
        replayed = await measure(batcher, warm, measured, profile=profile)
    finally:
        await supervisor.stop_all()
        await asyncio.to_thread(dispatcher.stop)
    print(f"{replayed.result(batch)} geofence={opts.geofence} move_m={opts.move}")


_LAT, _LON, _M_LAT = 48.1, 11.5, 1.0 / 111_195
_RADIUS, _ROAM, _VERTICES = 25.0, 15.0, 50


def _centre(account: uuid.UUID) -> tuple[float, float]:
    """A site's centre: every account's site a kilometre or so apart."""
    k = account.int % 10_000
    return _LAT + (k // 100) * 0.01, _LON + (k % 100) * 0.015


def _sites(fleet: Fleet) -> Place:
    """Geofences with every account's site (a 50-gon work area) and its mowers in it."""
    fences = Geofences()
    for account in fleet.accounts:
        lat0, lon0 = _centre(account)
        m_lon = _M_LAT / math.cos(math.radians(lat0))
        ring = [
            (lon0 + _RADIUS * math.cos(a) * m_lon, lat0 + _RADIUS * math.sin(a) * _M_LAT)
            for a in (2 * math.pi * i / _VERTICES for i in range(_VERTICES))
        ]
        area = Area(name="lawn", kind="work_area", rings=[[*ring, ring[0]]])
        fences.apply_areas(SiteAreas(site_id=account, account_id=account, version=1, areas=[area]))
    for mower, account in fleet.mowers:
        fences.apply_mower(
            MowerRegistration(mower_id=mower, account_id=account, name="m",
                              connection=Connection(kind="simulator"), site_id=account)
        )  # fmt: skip
    return fences.placement


class _Walk:
    """Each mower's spot near its site's centre, moving ``step`` metres a round."""

    def __init__(self, fleet: Fleet, step: float) -> None:
        rng = random.Random(11)
        self._rng, self._step = rng, step
        self._at = {m: (rng.uniform(-10, 10), rng.uniform(-10, 10)) for m, _ in fleet.mowers}

    def moved(self, state: MowerState) -> MowerState:
        x, y = self._at[state.mower_id]
        if self._step:
            a = self._rng.uniform(0, 2 * math.pi)
            nx, ny = x + self._step * math.cos(a), y + self._step * math.sin(a)
            if math.hypot(nx, ny) <= _ROAM:
                x, y = self._at[state.mower_id] = nx, ny
        lat0, lon0 = _centre(state.account_id)
        m_lon = _M_LAT / math.cos(math.radians(lat0))
        position = Position(lat=lat0 + y * _M_LAT, lon=lon0 + x * m_lon)
        return msgspec.structs.replace(state, position=position)


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=500, help="states per batch")
    parser.add_argument("--mowers", type=int, default=1000, help="mowers per round")
    parser.add_argument("--rounds", type=int, default=11, help="rounds of every mower's state")
    parser.add_argument("--profile", help="write a cProfile of the measured rounds here")
    parser.add_argument(
        "--python-gc",
        action="store_true",
        help="keep Python's collector settings (no young threshold, no freeze) to compare",
    )
    parser.add_argument(
        "--geofence",
        choices=("none", "positions", "areas"),
        default="none",
        help="states without positions, with positions, or with positions in sites' areas",
    )
    parser.add_argument("--move", type=float, default=0.0, help="metres a mower moves a round")
    parser.add_argument(
        "--rules-only", action="store_true", help="only the rules, one thread, no database"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="three rounds (and the geofence mode), to check"
    )
    args = parser.parse_args()
    rounds = 3 if args.smoke else args.rounds
    opts = Options(
        args.batch, rounds, args.mowers, args.profile, args.python_gc, args.geofence, args.move,
        args.rules_only,
    )  # fmt: skip
    if args.smoke and opts.geofence == "none" and not opts.rules_only:
        # The smoke also runs the geofence mode's own code (sites, fences, positions).
        rules_only(Options(rounds=rounds, mowers=200, geofence="areas", move=2.0))
    if opts.rules_only:
        rules_only(opts)
    else:
        asyncio.run(run(opts))


if __name__ == "__main__":
    main()
