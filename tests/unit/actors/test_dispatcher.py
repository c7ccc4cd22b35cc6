"""Dispatcher scheduling: isolation from slow handlers, fairness, slow-handler reports, metrics."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest

from actors import ActorMetrics, Dispatcher, DispatcherActor, Emergency
from actors._bridge import _inbox_of

from .probes import DispatcherProbe, Journal, Note, Stop, hold


def _wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


@pytest.mark.parametrize("workers", [2, 4])
def test_slow_handler_holds_back_no_other_actor(workers: int) -> None:
    dispatcher = Dispatcher(workers=workers, slow_handler_seconds=60)
    dispatcher.start()
    journal = Journal()
    slow = DispatcherProbe.start(dispatcher=dispatcher, name="slow", journal=journal)
    others = [
        DispatcherProbe.start(dispatcher=dispatcher, name=f"o{i}", journal=journal)
        for i in range(100)
    ]
    release = hold(slow)  # one worker is now stuck in the slow handler
    for i in range(10):
        for ref in others:
            ref.tell(Note(i))
    slow.tell(Note("slow-after"))
    # Everything except the slow actor is handled while the slow handler still runs.
    assert _wait_until(lambda: sum(r.proxy().counter.get() for r in others[-1:]) == 10)
    assert all(ref.proxy().counter.get(timeout=5) == 10 for ref in others)
    assert journal.of("slow") == ["on_start"]
    release.set()
    assert slow.ask(Note("slow-sync"), timeout=5) == "slow-sync"
    assert dispatcher.stop(timeout=5)


def test_with_one_worker_a_slow_handler_blocks_the_rest() -> None:
    # The counterpart of the test above: proves it would notice a stuck dispatcher.
    dispatcher = Dispatcher(workers=1, slow_handler_seconds=60)
    dispatcher.start()
    journal = Journal()
    slow = DispatcherProbe.start(dispatcher=dispatcher, name="slow", journal=journal)
    other = DispatcherProbe.start(dispatcher=dispatcher, name="other", journal=journal)
    other.ask("started", timeout=5)
    release = hold(slow)
    future = other.ask(Note(1), block=False)
    time.sleep(0.1)
    assert journal.of("other") == ["on_start"]
    release.set()
    assert future.get(timeout=5) == 1
    assert dispatcher.stop(timeout=5)


def test_a_busy_actor_yields_after_one_batch() -> None:
    dispatcher = Dispatcher(workers=1, batch=4)
    dispatcher.start()
    journal = Journal()
    busy = DispatcherProbe.start(dispatcher=dispatcher, name="busy", journal=journal)
    quiet = DispatcherProbe.start(dispatcher=dispatcher, name="quiet", journal=journal)
    quiet.ask("started", timeout=5)
    release = hold(busy)
    for i in range(1000):
        busy.tell(Note(i))
    quiet.tell(Note("quiet"))
    release.set()
    quiet.ask("sync", timeout=5)
    busy.ask("sync", timeout=5)
    order = [what for who, what in journal.entries if what not in ("on_start",)]
    # The held message ended busy's turn; then busy gets at most one batch (4) first.
    assert order.index("quiet") <= 4
    assert dispatcher.stop(timeout=5)


def test_slow_handler_is_logged_and_counted(registry: CollectorRegistry) -> None:
    metrics = ActorMetrics(registry)
    dispatcher = Dispatcher(workers=1, slow_handler_seconds=0.02, metrics=metrics)
    dispatcher.start()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    with structlog.testing.capture_logs() as logs:
        release = hold(ref)
        time.sleep(0.05)
        release.set()
        ref.proxy().add(1, 2).get(timeout=5)
    slow = [entry for entry in logs if entry["event"] == "actors.slow_handler"]
    assert len(slow) == 1
    assert slow[0]["actor"] == "DispatcherProbe"
    assert slow[0]["message_type"] == "Hold"
    assert slow[0]["actor_urn"] == ref.actor_urn
    assert slow[0]["seconds"] >= 0.02
    assert slow[0]["log_level"] == "warning"
    sample = registry.get_sample_value(
        "mowdeck_actor_slow_handlers_total", {"actor": "DispatcherProbe"}
    )
    assert sample == 1.0
    assert dispatcher.stop(timeout=5)


def test_metrics_report_actors_lanes_and_handling(registry: CollectorRegistry) -> None:
    metrics = ActorMetrics(registry)
    dispatcher = Dispatcher(workers=1, metrics=metrics)
    dispatcher.start()
    refs = [
        DispatcherProbe.start(dispatcher=dispatcher, name=f"p{i}", journal=Journal())
        for i in range(3)
    ]
    for ref in refs:
        ref.ask("started", timeout=5)
    release = hold(refs[0])
    for i in range(5):
        refs[0].tell(Note(i))
    refs[0].tell(Stop("e1"))
    refs[0].tell(Stop("e2"))
    assert registry.get_sample_value("mowdeck_actor_actors") == 3
    lane = "mowdeck_actor_mailbox_messages"
    assert registry.get_sample_value(lane, {"lane": "normal"}) == 5
    assert registry.get_sample_value(lane, {"lane": "emergency"}) == 2
    release.set()
    refs[0].ask("sync", timeout=5)
    assert registry.get_sample_value(lane, {"lane": "normal"}) == 0
    count = registry.get_sample_value(
        "mowdeck_actor_handling_seconds_count", {"actor": "DispatcherProbe"}
    )
    # 3 "started" asks, Hold, 5 notes, 2 emergencies, the sync ask.
    assert count == 3 + 1 + 5 + 2 + 1
    assert dispatcher.stop(timeout=5)
    assert registry.get_sample_value("mowdeck_actor_actors") == 0
    # Counts survive the dispatcher: a Prometheus counter never goes back.
    after = registry.get_sample_value(
        "mowdeck_actor_handling_seconds_count", {"actor": "DispatcherProbe"}
    )
    assert after is not None
    assert after >= count


def test_metric_families_names_and_types(registry: CollectorRegistry) -> None:
    metrics = ActorMetrics(registry)
    dispatcher = Dispatcher(workers=1, metrics=metrics)
    dispatcher.start()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    ref.ask(Note(1), timeout=5)
    metrics.restarts.labels(actor="X").inc()
    metrics.give_ups.labels(actor="X").inc()
    text = generate_latest(registry).decode()
    families = {family.name: family.type for family in registry.collect()}
    assert families == {
        "mowdeck_actor_actors": "gauge",
        "mowdeck_actor_mailbox_messages": "gauge",
        "mowdeck_actor_handling_seconds": "histogram",
        "mowdeck_actor_slow_handlers": "counter",
        "mowdeck_actor_failures": "counter",
        "mowdeck_actor_restarts": "counter",
        "mowdeck_actor_give_ups": "counter",
    }
    assert "mowdeck_actor_restarts_total" in text
    assert 'mowdeck_actor_handling_seconds_bucket{actor="DispatcherProbe",le="+Inf"} 1.0' in text
    assert dispatcher.stop(timeout=5)


def test_two_metrics_instances_live_in_one_process() -> None:
    registries = [CollectorRegistry(), CollectorRegistry()]
    dispatchers = [Dispatcher(workers=1, metrics=ActorMetrics(r)) for r in registries]
    for dispatcher in dispatchers:
        dispatcher.start()
    for count, dispatcher in enumerate(dispatchers, start=1):
        for i in range(count):
            ref = DispatcherProbe.start(dispatcher=dispatcher, name=f"p{i}", journal=Journal())
            ref.ask("started", timeout=5)
    # Each registry reports its own dispatcher only.
    assert [r.get_sample_value("mowdeck_actor_actors") for r in registries] == [1, 2]
    for dispatcher in dispatchers:
        assert dispatcher.stop(timeout=5)


def test_workers_sleep_when_there_is_no_mail(dispatcher: Dispatcher) -> None:
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    ref.ask("started", timeout=5)
    before = time.process_time()
    time.sleep(0.2)
    # Idle workers sleep on their wake locks; busy-polling would burn CPU here.
    assert time.process_time() - before < 0.05
    ref.stop()


def test_stop_from_an_actor_is_refused(dispatcher: Dispatcher) -> None:
    outcome: list[BaseException] = []

    class Stopper(DispatcherProbe):
        def stop_dispatcher(self) -> None:
            try:
                self.dispatcher.stop()
            except RuntimeError as error:
                outcome.append(error)

    ref = Stopper.start(dispatcher=dispatcher, name="s", journal=Journal())
    ref.proxy().stop_dispatcher().get(timeout=5)
    assert [str(error) for error in outcome] == [
        "a dispatcher cannot be stopped from one of its own actors"
    ]
    # Refused, not half done: the dispatcher still runs its actors and takes new ones.
    assert dispatcher.running
    assert ref.ask(Note("after"), timeout=5) == "after"
    other = DispatcherProbe.start(dispatcher=dispatcher, name="o", journal=Journal())
    assert other.ask(Note("new"), timeout=5) == "new"
    ref.stop()
    other.stop()


def test_dispatchers_alive_at_once_have_distinct_default_names() -> None:
    dispatchers = [Dispatcher(workers=1) for _ in range(3)]
    assert len({dispatcher.name for dispatcher in dispatchers}) == 3
    assert Dispatcher(workers=1, name="given").name == "given"


def test_invalid_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Dispatcher(workers=0)
    with pytest.raises(ValueError, match="at least 1"):
        Dispatcher(batch=0)


class _Sequenced(Emergency):
    __slots__ = ("number", "source")

    def __init__(self, source: int, number: int) -> None:
        self.source = source
        self.number = number


class _OrderChecker(DispatcherActor):
    """Records each lane's arrival order per producer and any overlapping handling."""

    def __init__(self, *, dispatcher: Dispatcher, handled: threading.Semaphore) -> None:
        super().__init__(dispatcher=dispatcher)
        self.handled_signal = handled
        self.last: dict[tuple[bool, int], int] = {}
        self.errors: list[str] = []
        self.handled = 0
        self.busy = False

    def on_receive(self, message: Any) -> Any:
        if self.busy:
            self.errors.append("two messages at once")
        self.busy = True
        if isinstance(message, _Sequenced):
            key, number = (True, message.source), message.number
        else:
            key, number = (False, message[0]), message[1]
        if self.last.get(key, -1) >= number:
            self.errors.append(f"out of order: {key} {number}")
        self.last[key] = number
        self.handled += 1
        self.handled_signal.release()
        if number % 97 == 0:
            time.sleep(0)  # give the GIL away mid-handler, as real handlers may
        self.busy = False
        return (self.handled, list(self.errors))


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_concurrent_producers_lose_no_mail_and_keep_lane_order(workers: int) -> None:
    # Normal puts to a ready or running actor skip the lock; this races them against
    # workers letting actors go idle, from several producer threads at once.
    # A tiny switch interval makes the GIL change hands far more often than usual.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        _race_producers_against_workers(workers)
    finally:
        sys.setswitchinterval(interval)


def _race_producers_against_workers(workers: int) -> None:
    dispatcher = Dispatcher(workers=workers, batch=4)
    dispatcher.start()
    signal = threading.Semaphore(0)
    refs = [_OrderChecker.start(dispatcher=dispatcher, handled=signal) for _ in range(20)]
    per_producer = 3_000

    def produce(source: int) -> None:
        for number in range(per_producer):
            ref = refs[(number * 7 + source) % len(refs)]
            ref.tell(_Sequenced(source, number) if number % 11 == 0 else (source, number))

    producers = [threading.Thread(target=produce, args=(source,)) for source in range(3)]
    for producer in producers:
        producer.start()
    for producer in producers:
        producer.join()
    # Wait without sending more mail: a later put would rescue a message left behind.
    deadline = time.monotonic() + 10
    for _ in range(3 * per_producer):
        assert signal.acquire(timeout=max(0.0, deadline - time.monotonic()))
    handled = 0
    for ref in refs:
        count, errors = ref.ask((99, 0), timeout=10)
        assert errors == []
        handled += count - 1
    assert handled == 3 * per_producer
    assert dispatcher.stop(timeout=10)


def test_a_start_that_raises_system_exit_costs_that_actor_not_the_worker() -> None:
    # pykka's start-up handling catches Exception only; with one worker, a worker lost to
    # a SystemExit would leave every other actor waiting for ever.
    class Exits(DispatcherActor):
        def on_start(self) -> None:
            raise SystemExit(3)

    dispatcher = Dispatcher(workers=1, slow_handler_seconds=60)
    dispatcher.start()
    failures: list[BaseException | None] = []
    doomed = Exits.start(dispatcher=dispatcher)
    _inbox_of(doomed).add_termination_callback(failures.append)
    healthy = DispatcherProbe.start(dispatcher=dispatcher, name="healthy", journal=Journal())
    assert healthy.ask(Note("still served"), timeout=5) == "still served"
    assert _wait_until(lambda: bool(failures))
    assert isinstance(failures[0], SystemExit)
    assert not doomed.is_alive()
    assert dispatcher.stop(timeout=5)


class ContextProbe(DispatcherActor):
    """Answers with what structlog has bound on the worker that runs it."""

    def on_receive(self, message: Any) -> Any:
        return structlog.contextvars.get_contextvars()


def test_workers_run_in_the_context_of_the_code_that_started_the_dispatcher() -> None:
    dispatcher = Dispatcher(workers=2)
    with structlog.contextvars.bound_contextvars(service="gateway"):
        dispatcher.start()
    try:
        probe = ContextProbe.start(dispatcher=dispatcher)
        # The teller's own bindings do not travel with a message; the worker's are its owner's.
        with structlog.contextvars.bound_contextvars(service="elsewhere"):
            answers = [probe.ask("bound?", timeout=5) for _ in range(10)]
        assert answers == [{"service": "gateway"}] * 10
    finally:
        assert dispatcher.stop(timeout=5)
