"""Mowdeck's actor runtime on pykka: many actors on a few shared worker threads.

- `Dispatcher` runs `DispatcherActor`s on a small worker pool; two-lane inboxes put
  messages of `Emergency` classes before normal mail.
- `LoopBridge` connects actors and the asyncio loop without blocking it.
- `ShardSupervisor` starts actors by key and restarts failed ones from a `Snapshot`.
- `BatchAsk` asks many supervised actors one question each and collects the answers
  in an `AnswerSink` resolved on the loop; `PrefetchedSnapshots` reads the snapshots of
  the actors it starts in one go.

See docs/actors.md. Tested with pykka 4.5 (pinned `>=4.1,<4.6` in pyproject.toml); the
runtime uses pykka's extension points for new actor types and a few of `pykka.Actor`'s
private loop helpers (`_actor_loop_setup`, `_handle_receive`, `_handle_failure`,
`_stop`), so a pykka upgrade must rerun `tests/unit/actors`.

The private modules, in dependency order (each imports only modules before it; no circle,
not even for the type checker): `_errors`, `_states`, `_future`, `_snapshot`, `_handling`,
`_inbox`, `_metrics`, `_dispatcher`, `_actor`, `_bridge`, `_supervisor`, `_batch_ask`.
"""

from actors._actor import DispatcherActor
from actors._batch_ask import (
    AnswerSink,
    BatchAsk,
    PrefetchedSnapshots,
    ReadSnapshots,
    snapshots_by_id,
)
from actors._bridge import LoopBridge
from actors._dispatcher import Dispatcher
from actors._errors import (
    ActorsError,
    DispatcherNotRunningError,
    GaveUpError,
    SupervisorClosedError,
    SupervisorError,
)
from actors._future import DispatcherFuture
from actors._inbox import Emergency, TwoLaneInbox, is_emergency
from actors._metrics import ActorMetrics
from actors._snapshot import InMemorySnapshotStore, Snapshot, SnapshotStore
from actors._supervisor import ActorFactory, ShardSupervisor

__all__ = [
    "ActorFactory",
    "ActorMetrics",
    "ActorsError",
    "AnswerSink",
    "BatchAsk",
    "Dispatcher",
    "DispatcherActor",
    "DispatcherFuture",
    "DispatcherNotRunningError",
    "Emergency",
    "GaveUpError",
    "InMemorySnapshotStore",
    "LoopBridge",
    "PrefetchedSnapshots",
    "ReadSnapshots",
    "ShardSupervisor",
    "Snapshot",
    "SnapshotStore",
    "SupervisorClosedError",
    "SupervisorError",
    "TwoLaneInbox",
    "is_emergency",
    "snapshots_by_id",
]
