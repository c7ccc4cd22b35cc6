"""Telemetry's ingest loop alone: CPU (and instructions) per state at a given batch size.

Run: python -m tests.bench.telemetry_replay [--batch 500] [--rounds 11] [--smoke]

The benchmark's mix of 1,000 mowers (``tests.bench.telemetry.states``) is handed to a
``StateBatcher`` as stand-in deliveries (``tests.support.fakes.FakeMsg``): the kit's
batching loop, the decoding, the fingerprint actors on their dispatcher (``BatchAsk``),
the plan and the PostgreSQL transaction all run as in the service; NATS does not (the
acks are recorded). The first round starts the actors and is measured apart
(``cold_cpu_us_per_state``; ``tests.bench.replay``). Every message is queued before the
loop runs, so each batch holds ``--batch`` states: the live benchmark's batch sizes
depend on the machine's speed, these do not.

Under ``valgrind --tool=callgrind --instr-atstart=no`` with ``MOWDECK_BENCH_CALLGRIND=1``
the instruction count covers the measured rounds only (``callgrind_control -i``): on a
shared machine, the repeatable figure. The count includes the actors' worker threads;
PostgreSQL's own work is in its server process, not here.
"""

from __future__ import annotations

import argparse
import asyncio

import asyncpg
from prometheus_client import CollectorRegistry

from actors import Dispatcher, LoopBridge, ShardSupervisor
from contracts.v1 import encode
from contracts.v1.subjects import telemetry_subject
from mowdeck.kit.garbage_collector import FREEZE_AFTER_STARTS, freeze, set_young_threshold
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.telemetry.actor import LatestRowSnapshots, actor_factory
from mowdeck.telemetry.fingerprint import Rules
from mowdeck.telemetry.ingest import StateBatcher
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.postgres import PostgresTelemetryStore, pool_options
from mowdeck.telemetry.settings import TelemetrySettings
from tests.bench.replay import measure
from tests.bench.telemetry import states
from tests.support.fakes import FakeMsg
from tests.support.postgres import create_database, drop_database

MOWERS = 1000


async def run(batch: int, rounds: int) -> None:
    """Replay ``rounds`` rounds of the mix, batches of ``batch``; print the figures."""
    settings = TelemetrySettings()
    set_young_threshold(settings.telemetry_gc_young_threshold)  # as `mowdeck telemetry`
    url = await asyncio.to_thread(create_database, "mowdeck_bench_replay")
    try:
        await migrate(url, discover(sql_root(), ["telemetry"]))
        pool = await asyncpg.create_pool(url, **pool_options(8, statement_timeout_ms=0))
        try:
            await _replay(pool, url, batch, rounds)
        finally:
            await pool.close()
    finally:
        await asyncio.to_thread(drop_database, url)


async def _replay(pool: asyncpg.Pool, url: str, batch: int, rounds: int) -> None:
    store = PostgresTelemetryStore(pool, url)
    rules = Rules()
    dispatcher = Dispatcher(workers=2, name="replay")
    dispatcher.start()
    snapshots = LatestRowSnapshots(store)
    supervisor = ShardSupervisor(dispatcher, actor_factory(dispatcher, rules), snapshots)

    def started(count: int) -> None:
        if count >= FREEZE_AFTER_STARTS:  # as `mowdeck telemetry` does
            freeze()

    batcher = StateBatcher(
        store,
        supervisor=supervisor,
        snapshots=snapshots,
        bridge=LoopBridge(asyncio.get_running_loop()),
        rules=rules,
        metrics=TelemetryMetrics(CollectorRegistry()),
        batch_max=batch,
        linger=0.02,
        on_actors_started=started,
    )
    msgs = [FakeMsg(encode(s), telemetry_subject(s.mower_id)) for s in states(MOWERS, rounds)]
    warm, measured = msgs[:MOWERS], msgs[MOWERS:]
    try:
        replayed = await measure(batcher, warm, measured)
    finally:
        await supervisor.stop_all()
        await asyncio.to_thread(dispatcher.stop)
    print(replayed.result(batch))


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=500, help="states per batch")
    parser.add_argument("--rounds", type=int, default=11, help="rounds of 1,000 mowers")
    parser.add_argument("--smoke", action="store_true", help="three rounds, to check it runs")
    args = parser.parse_args()
    asyncio.run(run(args.batch, 3 if args.smoke else args.rounds))


if __name__ == "__main__":
    main()
