"""pykka's API and guarantees, run against ThreadingActor and DispatcherActor alike."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest
from pykka._envelope import Envelope

from actors import Dispatcher, DispatcherActor, DispatcherNotRunningError

from .probes import Crash, DispatcherProbe, Journal, Note, ThreadingProbe, hold

Spawn = Callable[..., pykka.ActorRef[Any]]


@pytest.fixture(params=["threading", "dispatcher"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def journal() -> Journal:
    return Journal()


@pytest.fixture
def spawn(kind: str, dispatcher: Dispatcher, journal: Journal) -> Iterator[Spawn]:
    """Start a probe of the parametrized kind; all are stopped after the test."""

    def start(name: str = "p", **kwargs: Any) -> pykka.ActorRef[Any]:
        if kind == "threading":
            return ThreadingProbe.start(name=name, journal=journal, **kwargs)
        return DispatcherProbe.start(dispatcher=dispatcher, name=name, journal=journal, **kwargs)

    yield start
    pykka.ActorRegistry.stop_all(timeout=5)


def test_ask_returns_the_handlers_answer(spawn: Spawn) -> None:
    ref = spawn()
    assert ref.ask(Note(1)) == 1
    assert ref.ask("hello") == ("echo", "hello")


def test_tells_are_handled_in_order_before_a_later_ask(spawn: Spawn, journal: Journal) -> None:
    ref = spawn()
    for i in range(200):
        ref.tell(Note(i))
    assert ref.ask(Note("last")) == "last"
    assert journal.of("p") == ["on_start", *range(200), "last"]


def test_on_start_runs_first_and_off_the_callers_thread(spawn: Spawn, journal: Journal) -> None:
    ref = spawn()
    ref.ask(Note("x"))
    assert journal.of("p")[:2] == ["on_start", "x"]
    assert ref.proxy().start_thread.get() != threading.current_thread().name


def test_exception_in_ask_goes_to_the_caller_and_the_actor_lives(
    spawn: Spawn, journal: Journal
) -> None:
    ref = spawn()
    with pytest.raises(ValueError, match="bad ask"):
        ref.ask(Crash("bad ask"))
    assert ref.is_alive()
    assert ref.ask(Note(2)) == 2
    assert not any(isinstance(e, tuple) for e in journal.of("p"))


def test_exception_in_tell_calls_on_failure_and_stops_the_actor(
    spawn: Spawn, journal: Journal
) -> None:
    ref = spawn()
    ref.tell(Crash("bad tell"))
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(Note("after"), timeout=5)
    assert ("on_failure", "ValueError('bad tell')") in journal.of("p")
    assert "on_stop" not in journal.of("p")
    assert pykka.ActorRegistry.get_by_urn(ref.actor_urn) is None


def test_failing_on_start_stops_the_actor(spawn: Spawn) -> None:
    ref = spawn(fail_on_start=True)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(Note(1), timeout=5)
    assert not ref.is_alive()


def test_stop_runs_on_stop_and_reports_whether_it_was_alive(spawn: Spawn, journal: Journal) -> None:
    ref = spawn()
    assert ref.stop() is True
    assert journal.of("p")[-1] == "on_stop"
    assert ref.stop() is False
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(Note(1))
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(Note(1))


def test_mail_queued_before_stop_is_handled_and_after_stop_answered_dead(
    spawn: Spawn, journal: Journal
) -> None:
    ref = spawn()
    release = hold(ref)
    before = ref.ask(Note("before"), block=False)
    stopped = ref.stop(block=False)
    after = ref.ask(Note("after"), block=False)
    release.set()
    assert before.get(timeout=5) == "before"
    assert stopped.get(timeout=5) is True
    with pytest.raises(pykka.ActorDeadError):
        after.get(timeout=5)
    assert journal.of("p")[-2:] == ["before", "on_stop"]


def test_proxy_calls_and_attributes(spawn: Spawn) -> None:
    proxy = spawn().proxy()
    assert proxy.add(2, 3).get() == 5
    proxy.counter = 41
    proxy.on_receive(Note("via proxy")).get()
    assert proxy.counter.get() == 42


def test_registry_finds_and_forgets_actors(spawn: Spawn) -> None:
    a = spawn("a")
    b = spawn("b")
    assert {r.actor_urn for r in pykka.ActorRegistry.get_all()} == {a.actor_urn, b.actor_urn}
    assert pykka.ActorRegistry.get_by_urn(b.actor_urn) is b
    assert len(pykka.ActorRegistry.get_by_class(a.actor_class)) == 2
    a.stop()
    assert pykka.ActorRegistry.get_all() == [b]


def test_broadcast_reaches_every_actor(spawn: Spawn, journal: Journal) -> None:
    refs = [spawn(f"p{i}") for i in range(5)]
    pykka.ActorRegistry.broadcast(Note("all"))
    for i, ref in enumerate(refs):
        ref.ask("sync")
        assert journal.of(f"p{i}")[-1] == "all"


def test_stop_all_stops_everything(spawn: Spawn) -> None:
    refs = [spawn(f"p{i}") for i in range(20)]
    assert pykka.ActorRegistry.stop_all(timeout=5) == [True] * 20
    assert not any(ref.is_alive() for ref in refs)


def test_get_with_timeout_raises_timeout(spawn: Spawn) -> None:
    ref = spawn()
    release = hold(ref)
    future = ref.ask(Note(1), block=False)
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0.05)
    release.set()
    assert future.get(timeout=5) == 1


def test_future_map_and_join(spawn: Spawn) -> None:
    ref = spawn()
    a = ref.ask(Note(1), block=False)
    b = ref.ask(Note(2), block=False)
    assert a.map(lambda v: v * 10).get(timeout=5) == 10
    assert list(a.join(b).get(timeout=5)) == [1, 2]


def test_one_message_at_a_time_under_concurrent_senders(spawn: Spawn) -> None:
    ref = spawn()

    def send() -> None:
        for i in range(300):
            ref.tell(Note(i))

    senders = [threading.Thread(target=send) for _ in range(4)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    # The probe asserts it is never re-entered; a violation would have failed it.
    assert ref.ask(Note("end"), timeout=5) == "end"
    assert ref.proxy().counter.get() == 1201


# -- DispatcherActor only ---------------------------------------------------------


def test_dispatcher_actors_share_the_workers(dispatcher: Dispatcher, journal: Journal) -> None:
    refs = [
        DispatcherProbe.start(dispatcher=dispatcher, name=f"p{i}", journal=journal)
        for i in range(50)
    ]
    threads = {ref.proxy().thread_name().get() for ref in refs}
    assert threads <= {"mowdeck-actors-test-0", "mowdeck-actors-test-1"}
    assert threading.active_count() < 20
    pykka.ActorRegistry.stop_all()


def test_start_on_a_stopped_dispatcher_is_refused_and_leaves_nothing(journal: Journal) -> None:
    dispatcher = Dispatcher(workers=1)
    with pytest.raises(DispatcherNotRunningError):
        DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    dispatcher.start()
    dispatcher.stop()
    with pytest.raises(DispatcherNotRunningError):
        DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    assert pykka.ActorRegistry.get_all() == []


def test_dispatcher_stop_drains_mail_then_stops_actors(journal: Journal) -> None:
    dispatcher = Dispatcher(workers=1)
    dispatcher.start()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    for i in range(10):
        ref.tell(Note(i))
    assert dispatcher.stop(timeout=5)
    assert journal.of("p") == ["on_start", *range(10), "on_stop"]
    assert not ref.is_alive()
    assert len(dispatcher) == 0


def test_dispatcher_stop_reports_a_stuck_handler(journal: Journal) -> None:
    dispatcher = Dispatcher(workers=1, slow_handler_seconds=60)
    dispatcher.start()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    release = hold(ref)
    assert dispatcher.stop(timeout=0.1) is False
    release.set()
    assert dispatcher.stop(timeout=5) is True
    assert journal.of("p")[-1] == "on_stop"


def test_two_dispatchers_are_independent(journal: Journal) -> None:
    first, second = Dispatcher(workers=1, name="one"), Dispatcher(workers=1, name="two")
    first.start()
    second.start()
    a = DispatcherProbe.start(dispatcher=first, name="a", journal=journal)
    b = DispatcherProbe.start(dispatcher=second, name="b", journal=journal)
    release = hold(a)  # first's only worker is busy
    assert b.ask(Note("b runs"), timeout=5) == "b runs"
    assert b.proxy().thread_name().get() == "mowdeck-actors-two-0"
    release.set()
    assert first.stop(timeout=5)
    assert second.stop(timeout=5)


def test_mail_racing_into_a_dead_actor_is_answered(dispatcher: Dispatcher) -> None:
    journal = Journal()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    ref.stop()
    # A sender that saw is_alive() just before the stop: its envelope must not hang.
    future = DispatcherActor._create_future()
    ref.actor_inbox.put(Envelope(Note(1), reply_to=future))
    with pytest.raises(pykka.ActorDeadError):
        future.get(timeout=1)


def test_actor_stopped_can_be_waited_on(spawn: Spawn) -> None:
    ref = spawn()
    other = spawn("other")
    assert ref.actor_stopped.wait(timeout=0.01) is False
    waiter_saw: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_saw.append(ref.actor_stopped.wait(5)))
    waiter.start()
    other.stop()  # another actor's stop must not wake this waiter falsely
    assert ref.stop() is True
    waiter.join(5)
    assert waiter_saw == [True]
    assert ref.actor_stopped.is_set()


def test_urns_are_unique_uuid4(spawn: Spawn) -> None:
    refs = [spawn(f"p{i}") for i in range(200)]
    urns = {ref.actor_urn for ref in refs}
    assert len(urns) == 200
    assert all(uuid.UUID(urn).version == 4 for urn in urns)
