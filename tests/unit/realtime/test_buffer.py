"""The send buffer: states conflated per mower in dispatch order, the rest never dropped."""

from __future__ import annotations

import uuid

import pytest

from mowdeck.realtime.buffer import SendBuffer
from mowdeck.realtime.frames import Frame, FrameType

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def f(type_: FrameType, id_: str, mower: uuid.UUID | None = A, born: float = 0.0) -> Frame:
    return Frame(type_, id_, b"{}", mower, born)


@pytest.mark.parametrize(
    ("pushed", "taken", "conflated"),
    [
        ([("state", "1", A), ("state", "2", B)], ["1", "2"], 0),
        ([("state", "1", A), ("state", "2", A)], ["2"], 1),
        # The newer state moves behind what came between: ids never go backwards.
        ([("state", "1", A), ("command", "2", A), ("state", "3", A)], ["2", "3"], 1),
        ([("command", "1", A), ("command", "2", A)], ["1", "2"], 0),
        ([("link", "1", A), ("notification", "2", A), ("link", "3", A)], ["1", "2", "3"], 0),
        ([("state", "1", A), ("state", "2", B), ("state", "3", A)], ["2", "3"], 1),
        ([("heartbeat", "1", None), ("heartbeat", "2", None)], ["1", "2"], 0),
    ],
    ids=[
        "two-mowers",
        "same-mower",
        "keeps-order",
        "commands-kept",
        "links-and-notifications-kept",
        "per-mower",
        "control-kept",
    ],
)
def test_conflation(
    pushed: list[tuple[FrameType, str, uuid.UUID | None]], taken: list[str], conflated: int
) -> None:
    buffer = SendBuffer(max_events=100, max_lag=10)
    for type_, id_, mower in pushed:
        assert buffer.push(f(type_, id_, mower), now=0.0) is None
    assert [x.id for x in buffer.take()] == taken
    assert buffer.conflated == conflated
    assert len(buffer) == 0


def test_a_full_buffer_closes_the_client() -> None:
    buffer = SendBuffer(max_events=3, max_lag=10)
    reasons = [buffer.push(f("command", str(i)), now=0.0) for i in range(4)]
    assert reasons[:3] == [None, None, None]
    assert reasons[3] is not None and reasons[3].startswith("too-far-behind")


def test_states_alone_never_fill_it_beyond_one_per_mower() -> None:
    buffer = SendBuffer(max_events=2, max_lag=10)
    for i in range(1000):
        assert buffer.push(f("state", str(i), A if i % 2 else B), now=0.0) is None
    assert len(buffer) == 2


@pytest.mark.parametrize(
    ("waited", "closes"), [(9.9, False), (10.1, True)], ids=["within", "beyond"]
)
def test_an_event_waiting_beyond_the_lag_closes_the_client(waited: float, closes: bool) -> None:
    buffer = SendBuffer(max_events=100, max_lag=10)
    buffer.push(f("command", "1", born=0.0), now=0.0)
    reason = buffer.push(f("command", "2", born=waited), now=waited)
    assert (reason is not None) is closes


def test_discarding_a_mower_drops_what_waits_for_it() -> None:
    buffer = SendBuffer(max_events=100, max_lag=10)
    buffer.push(f("state", "1", A), 0.0)
    buffer.push(f("command", "2", B), 0.0)
    buffer.push(f("link", "3", A), 0.0)
    buffer.discard_mowers({A})
    assert [x.id for x in buffer.take()] == ["2"]


def test_a_bounded_take_leaves_the_rest_conflating() -> None:
    buffer = SendBuffer(max_events=100, max_lag=10)
    for i, mower in enumerate([A, B, uuid.UUID(int=3)]):
        buffer.push(f("state", str(i), mower), 0.0)
    assert [x.id for x in buffer.take(2)] == ["0", "1"]
    buffer.push(f("state", "3", uuid.UUID(int=3)), 0.0)
    assert [x.id for x in buffer.take(2)] == ["3"]
    assert buffer.conflated == 1


def test_old_states_alone_do_not_count_as_lag() -> None:
    buffer = SendBuffer(max_events=100, max_lag=10)
    buffer.push(f("state", "1", A, born=0.0), 0.0)
    assert buffer.push(f("state", "2", B, born=50.0), now=50.0) is None
    assert buffer.push(f("heartbeat", "3", None, born=50.0), now=50.0) is None
    assert buffer.push(f("state", "4", B, born=61.0), now=61.0) is not None
