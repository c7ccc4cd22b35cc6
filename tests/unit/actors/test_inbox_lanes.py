"""Emergency lane: an emergency message overtakes normal mail, in its actor and across actors."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import pykka
import pytest
from pykka.messages import ProxyCall

from actors import Dispatcher, DispatcherActor, Emergency, is_emergency

from .probes import DispatcherProbe, Journal, Note, Stop, hold


class Marked:
    emergency: ClassVar[bool] = True


class MarkedFalse:
    emergency: ClassVar[bool] = False


class Truthy:
    emergency: ClassVar[int] = 1


class OnInstanceOnly:
    def __init__(self) -> None:
        self.emergency = True


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (Stop("x"), True),
        (Marked(), True),
        (Emergency(), True),
        (MarkedFalse(), False),
        (Truthy(), False),
        (OnInstanceOnly(), False),
        (Note("x"), False),
        ("text", False),
        (ProxyCall(attr_path=("m",), args=(), kwargs={}), False),
    ],
    ids=[
        "emergency-mixin",
        "classvar-true",
        "emergency-base",
        "classvar-false",
        "truthy-not-bool",
        "instance-attribute-ignored",
        "normal",
        "str",
        "proxy-call",
    ],
)
def test_lane_is_decided_by_the_message_class(message: object, expected: bool) -> None:
    assert is_emergency(message) is expected


def test_emergency_is_handled_next_behind_1000_queued_normal(dispatcher: Dispatcher) -> None:
    journal = Journal()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    release = hold(ref)
    for i in range(1000):
        ref.tell(Note(i))
    ref.tell(Stop("STOP"))
    release.set()
    ref.ask(Note("sync"), timeout=5)
    assert journal.of("p") == ["on_start", "STOP", *range(1000), "sync"]


def test_emergencies_keep_their_arrival_order(dispatcher: Dispatcher) -> None:
    journal = Journal()
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=journal)
    release = hold(ref)
    ref.tell(Note("n1"))
    ref.tell(Stop("e1"))
    ref.tell(Note("n2"))
    ref.tell(Stop("e2"))
    ref.tell(Stop("e3"))
    release.set()
    ref.ask(Note("sync"), timeout=5)
    assert journal.of("p") == ["on_start", "e1", "e2", "e3", "n1", "n2", "sync"]


def test_emergency_ask_is_answered(dispatcher: Dispatcher) -> None:
    ref = DispatcherProbe.start(dispatcher=dispatcher, name="p", journal=Journal())
    assert ref.ask(Stop("now"), timeout=5) == "now"
    ref.stop()


def test_actor_with_emergency_mail_runs_before_actors_with_only_normal_mail() -> None:
    dispatcher = Dispatcher(workers=1, batch=4)
    dispatcher.start()
    journal = Journal()
    gate = DispatcherProbe.start(dispatcher=dispatcher, name="gate", journal=journal)
    busy = [
        DispatcherProbe.start(dispatcher=dispatcher, name=f"busy{i}", journal=journal)
        for i in range(3)
    ]
    target = DispatcherProbe.start(dispatcher=dispatcher, name="target", journal=journal)
    for ref in [*busy, target]:
        ref.ask("started", timeout=5)
    release = hold(gate)
    for ref in busy:
        for i in range(50):
            ref.tell(Note(i))
    target.tell(Note("target-normal"))
    target.tell(Stop("target-STOP"))
    release.set()
    target.ask("sync", timeout=5)
    for ref in busy:
        ref.ask("sync", timeout=5)
    assert dispatcher.stop(timeout=5)
    handled = [what for who, what in journal.entries if who != "gate" and what != "on_start"]
    # The target was queued last, behind 150 normal messages of other actors.
    assert handled[0] == "target-STOP"
    assert len(handled) == 3 * 50 + 2 + 4  # + 4 syncs


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Alarm(Emergency):
    pass


class Counter(DispatcherActor):
    """Logs a global handling position; cheap, so 10,000 of them start quickly."""

    def __init__(
        self, *, dispatcher: Dispatcher, positions: itertools.count[int], log: list[Any]
    ) -> None:
        super().__init__(dispatcher=dispatcher)
        self.positions = positions
        self.log = log

    def on_receive(self, message: Any) -> Any:
        position = next(self.positions)
        if isinstance(message, Alarm):
            self.log.append(position)
        elif isinstance(message, threading.Event):
            message.wait(10)
        return None


def test_emergency_overtakes_the_backlog_of_10000_actors() -> None:
    dispatcher = Dispatcher(workers=2, batch=32, slow_handler_seconds=60)
    dispatcher.start()
    positions = itertools.count()
    log: list[Any] = []
    refs = [
        Counter.start(dispatcher=dispatcher, positions=positions, log=log) for _ in range(10_000)
    ]
    # Park both workers so the backlog builds up deterministically.
    parked = threading.Event()
    refs[0].tell(parked)
    refs[1].tell(parked)
    per_actor = 5
    for _ in range(per_actor):
        for ref in refs[2:]:
            ref.tell(Tick())
    refs[7_777].tell(Alarm())
    parked.set()
    refs[7_777].ask(Tick(), timeout=30)
    assert len(log) == 1
    backlog = per_actor * (len(refs) - 2)
    # Handled before the alarm: on_start turns and the two parked messages, plus at most
    # the message each worker was handling when the alarm became visible.
    assert log[0] < len(refs) + 2 + 2 * 32, f"alarm at position {log[0]} of {backlog}"
    assert dispatcher.stop(timeout=30)
    assert pykka.ActorRegistry.get_all() == []
