"""Actors and helpers shared by the actor runtime tests."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar

import pykka

from actors import Dispatcher, DispatcherActor, Emergency


@dataclass(frozen=True)
class Hold:
    """Block the handling worker until `release` is set; `entered` says it got there."""

    entered: threading.Event
    release: threading.Event


@dataclass(frozen=True)
class Note:
    """A normal message that is just recorded."""

    value: Any


@dataclass(frozen=True)
class Stop(Emergency):
    """An emergency message that is just recorded."""

    value: Any


@dataclass(frozen=True)
class Crash:
    """Raise in the handler."""

    reason: str = "boom"


class Journal:
    """Thread-safe record of what every probe handled, in handling order."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []
        self._lock = threading.Lock()

    def add(self, who: str, what: Any) -> None:
        with self._lock:
            self.entries.append((who, what))

    def of(self, who: str) -> list[Any]:
        with self._lock:
            return [what for name, what in self.entries if name == who]


class ProbeBehaviour:
    """Behaviour shared by the threading and the dispatcher probe."""

    name: str
    journal: Journal
    busy: bool
    counter: int

    def _setup(self, name: str, journal: Journal, fail_on_start: bool = False) -> None:
        self.name = name
        self.journal = journal
        self.busy = False
        self.counter = 0
        self.fail_on_start = fail_on_start
        self.start_thread: str | None = None

    def on_start(self) -> None:
        self.start_thread = threading.current_thread().name
        self.journal.add(self.name, "on_start")
        if self.fail_on_start:
            raise RuntimeError("on_start failed")

    def on_stop(self) -> None:
        self.journal.add(self.name, "on_stop")

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.journal.add(self.name, ("on_failure", repr(exception_value)))

    def on_receive(self, message: Any) -> Any:
        # Detects two messages of one actor running at once.
        assert not self.busy, "two messages of one actor ran concurrently"
        self.busy = True
        try:
            match message:
                case Hold(entered, release):
                    entered.set()
                    release.wait(10)
                    return "held"
                case Crash(reason):
                    raise ValueError(reason)
                case Note(value) | Stop(value):
                    self.counter += 1
                    self.journal.add(self.name, value)
                    return value
                case _:
                    return ("echo", message)
        finally:
            self.busy = False

    def add(self, a: int, b: int) -> int:
        return a + b

    def thread_name(self) -> str:
        return threading.current_thread().name


class ThreadingProbe(ProbeBehaviour, pykka.ThreadingActor):
    use_daemon_thread: ClassVar[bool] = True

    def __init__(self, name: str, journal: Journal, fail_on_start: bool = False) -> None:
        super().__init__()
        self._setup(name, journal, fail_on_start)


class DispatcherProbe(ProbeBehaviour, DispatcherActor):
    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        name: str,
        journal: Journal,
        fail_on_start: bool = False,
    ) -> None:
        super().__init__(dispatcher=dispatcher)
        self._setup(name, journal, fail_on_start)


def hold(ref: pykka.ActorRef[Any]) -> threading.Event:
    """Occupy the actor (and the worker running it) until the returned event is set."""
    entered, release = threading.Event(), threading.Event()
    ref.tell(Hold(entered, release))
    assert entered.wait(5), "the held actor never ran"
    return release
