"""The emergency lane's own subscription: only marked messages reach its handler."""

from __future__ import annotations

import os
import threading

import pytest
import structlog
from nats.aio.msg import Msg

from contracts.v1.subjects import PRIORITY_HEADER
from mowdeck.gateway.intake import EMERGENCY_MARKER
from mowdeck.gateway.lane import EmergencyLane
from mowdeck.kit.bus import Bus, header
from mowdeck.kit.logging import bound
from mowdeck.kit.loop_scheduling import run_realtime
from mowdeck.kit.wire import is_fast
from tests.support.eventually import sentinel_through

SUBJECT = "command.mower.00000000-0000-4000-8000-000000000007"
SENTINEL = b"sentinel"


class _Handled:
    def __init__(self) -> None:
        self.msgs: list[Msg] = []
        self.threads: set[str] = set()
        self.bound: list[dict[str, object]] = []  # what structlog had bound, per message

    def __call__(self, msg: Msg) -> None:
        self.threads.add(threading.current_thread().name)
        self.bound.append(structlog.contextvars.get_contextvars())
        if msg.data == b"boom":
            raise RuntimeError("a handler's own bug")
        self.msgs.append(msg)


async def _lane(
    bus: Bus, marker: bytes | None, realtime_priority: int = 0
) -> tuple[EmergencyLane, _Handled]:
    # On the bus's kind of client: the fast one's direct path, or the stock callback one.
    handled = _Handled()
    url = bus.nc.connected_url
    assert url is not None
    lane = EmergencyLane(
        f"nats://{url.netloc}",
        name="lane-test",
        subject="command.mower.*",
        handle=handled,
        marker=marker,
        fast_path=is_fast(bus.nc),
        realtime_priority=realtime_priority,
    )
    await lane.start()
    return lane, handled


async def _publish_all(bus: Bus, messages: list[tuple[bytes, dict[str, str] | None]]) -> None:
    for data, headers in messages:
        await bus.nc.publish(SUBJECT, data, headers=headers)
    await bus.nc.flush()


async def _settled(bus: Bus, handled: _Handled) -> None:
    """Until a marked sentinel, published behind the rest on the same subject, was handled.

    One connection publishes, one subscription reads: what the lane was going to hand
    over has been handed over by then. The sentinel is taken off ``handled.msgs``.
    """
    await sentinel_through(
        lambda: _publish_all(bus, [(SENTINEL, {PRIORITY_HEADER: "emergency"})]),
        lambda: handled.msgs and handled.msgs[-1].data == SENTINEL,  # filled on the lane's thread
    )
    handled.msgs.pop()


async def test_only_messages_with_the_marker_reach_the_handler(bus: Bus) -> None:
    lane, handled = await _lane(bus, EMERGENCY_MARKER)
    try:
        await _publish_all(
            bus,
            [
                (b"normal", {PRIORITY_HEADER: "normal"}),
                (b"no headers", None),
                (b"boom", {PRIORITY_HEADER: "emergency"}),  # raises: logged, lane goes on
                (b"stop", {PRIORITY_HEADER: "emergency", "Nats-Msg-Id": "s-1"}),
                # The marker is only a pre-filter: the handler still reads the header.
                (b"look-alike", {"X-Note": "emergency", PRIORITY_HEADER: "normal"}),
            ],
        )
        await _settled(bus, handled)
        assert [m.data for m in handled.msgs] == [b"stop", b"look-alike"]
        stop, look_alike = handled.msgs
        assert stop.subject == SUBJECT
        assert header(stop, PRIORITY_HEADER) == "emergency"
        assert header(stop, "Nats-Msg-Id") == "s-1"
        assert header(look_alike, PRIORITY_HEADER) == "normal"
        assert handled.threads == {"lane-test"}
        assert lane.alive
    finally:
        await lane.stop()


async def test_without_a_marker_every_message_reaches_the_handler(bus: Bus) -> None:
    lane, handled = await _lane(bus, None)
    try:
        await _publish_all(bus, [(b"normal", {PRIORITY_HEADER: "normal"}), (b"bare", None)])
        await _settled(bus, handled)
        assert [m.data for m in handled.msgs] == [b"normal", b"bare"]
        assert handled.msgs[1].headers is None
    finally:
        await lane.stop()


def _lane_thread_id(lane: EmergencyLane) -> int:
    thread = lane._thread
    assert thread is not None
    assert thread.native_id is not None
    return thread.native_id


def _may_run_realtime() -> bool:
    """Whether this process may give a thread SCHED_FIFO (tried on a throwaway thread)."""
    refused: list[str | None] = []
    probe = threading.Thread(target=lambda: refused.append(run_realtime(1)))
    probe.start()
    probe.join()
    return refused == [None]


async def test_the_lane_thread_runs_sched_fifo_at_its_priority(bus: Bus) -> None:
    if not _may_run_realtime():
        pytest.skip("this process may not use SCHED_FIFO (no CAP_SYS_NICE, no RLIMIT_RTPRIO)")
    lane, handled = await _lane(bus, EMERGENCY_MARKER, realtime_priority=7)
    try:
        tid = _lane_thread_id(lane)
        assert lane.realtime
        assert os.sched_getscheduler(tid) == os.SCHED_FIFO
        assert os.sched_getparam(tid).sched_priority == 7
        # Only the lane's thread: the process's main thread keeps ordinary scheduling.
        assert os.sched_getscheduler(0) == os.SCHED_OTHER
        await _publish_all(bus, [(b"stop", {PRIORITY_HEADER: "emergency"})])
        await _settled(bus, handled)
        assert [m.data for m in handled.msgs] == [b"stop"]
    finally:
        await lane.stop()


async def test_a_lane_refused_realtime_runs_ordinarily_scheduled_and_says_so(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = "Operation not permitted (needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 7)"
    monkeypatch.setattr("mowdeck.gateway.lane.run_realtime", lambda _priority: refusal)
    with structlog.testing.capture_logs() as logs:
        lane, handled = await _lane(bus, EMERGENCY_MARKER, realtime_priority=7)
    try:
        assert not lane.realtime
        assert os.sched_getscheduler(_lane_thread_id(lane)) == os.SCHED_OTHER
        [warning] = [line for line in logs if line.get("reason") == refusal]
        assert warning["log_level"] == "warning"
        assert warning["setting"] == "MOWDECK_GATEWAY_LANE_REALTIME_PRIORITY"
        await _publish_all(bus, [(b"stop", {PRIORITY_HEADER: "emergency"})])
        await _settled(bus, handled)
        assert [m.data for m in handled.msgs] == [b"stop"]
    finally:
        await lane.stop()


async def test_priority_zero_leaves_the_lane_ordinarily_scheduled(bus: Bus) -> None:
    lane, _ = await _lane(bus, EMERGENCY_MARKER, realtime_priority=0)
    try:
        assert not lane.realtime
        assert os.sched_getscheduler(_lane_thread_id(lane)) == os.SCHED_OTHER
    finally:
        await lane.stop()


async def test_the_lane_s_thread_logs_as_the_service_that_started_it(bus: Bus) -> None:
    with bound(service="gateway"):
        lane, handled = await _lane(bus, EMERGENCY_MARKER)
    try:
        await _publish_all(bus, [(b"stop", {PRIORITY_HEADER: "emergency"})])
        await _settled(bus, handled)
        assert handled.bound == [{"service": "gateway"}] * 2  # the stop and the sentinel
    finally:
        await lane.stop()
