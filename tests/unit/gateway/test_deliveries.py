"""Deliveries held until their final result is stored, and the finals remembered."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from mowdeck.gateway import deliveries as deliveries_module
from mowdeck.gateway.deliveries import FinalOutcomes, HeldDeliveries
from mowdeck.gateway.metrics import GatewayMetrics
from tests.support.fakes import FakeMsg


def held() -> tuple[HeldDeliveries, GatewayMetrics]:
    metrics = GatewayMetrics(CollectorRegistry())
    return HeldDeliveries(metrics, progress_every=10.0), metrics


def in_flight(metrics: GatewayMetrics) -> float:
    """The in-flight gauge as a scrape reads it."""
    return next(iter(metrics.in_flight.collect())).samples[0].value


def msg(n: int = 1) -> FakeMsg:
    return FakeMsg(stream="COMMANDS", consumer="device-gateway-0", num_delivered=n)


async def test_a_delivery_is_acknowledged_once_its_final_result_is_stored() -> None:
    deliveries, metrics = held()
    cid = uuid.uuid4()
    first = msg()
    deliveries.hold(cid, first)
    assert cid in deliveries
    assert in_flight(metrics) == 1
    await deliveries.flush()
    assert first.settled == []
    deliveries.finished(cid)
    await deliveries.flush()
    assert first.settled == ["ack"]
    assert cid not in deliveries
    assert in_flight(metrics) == 0
    assert await deliveries.wait_empty(0.1)


async def test_the_acks_of_one_loop_turn_are_written_together_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A freed slot of the in-flight bound comes back with the ack: no timer may hold it.
    writes: list[int] = []

    async def ack_all(msgs: Sequence[FakeMsg]) -> None:
        writes.append(len(msgs))
        for m in msgs:
            await m.ack()

    monkeypatch.setattr(deliveries_module, "ack_together", ack_all)
    deliveries, _ = held()
    deliveries.start()
    try:
        cids, msgs = [uuid.uuid4() for _ in range(3)], [msg() for _ in range(3)]
        for cid, m in zip(cids, msgs, strict=True):
            deliveries.hold(cid, m)
        await asyncio.sleep(0)  # the writer waits for the first ack
        for cid in cids:  # one loop turn's stored results
            deliveries.finished(cid)
        await asyncio.sleep(0)  # the writer ran before this callback, queued after it
        assert writes == [3]
        assert [m.settled for m in msgs] == [["ack"]] * 3
    finally:
        await deliveries.stop()


async def test_a_redelivery_takes_the_held_ones_place_and_is_the_one_acknowledged() -> None:
    deliveries, _ = held()
    cid = uuid.uuid4()
    first, again = msg(1), msg(2)
    deliveries.hold(cid, first)
    deliveries.hold(cid, again)
    deliveries.finished(cid)
    await deliveries.flush()
    assert (first.settled, again.settled) == ([], ["ack"])


async def test_a_delivery_whose_final_result_is_stored_already_is_acknowledged_at_once() -> None:
    deliveries, _ = held()
    cid = uuid.uuid4()
    deliveries.finished(cid)  # the result of a stop the lane sent, before its stream copy
    copy = msg()
    deliveries.hold(cid, copy)
    await deliveries.flush()
    assert copy.settled == ["ack"]
    assert cid not in deliveries


async def test_the_sweep_reports_every_held_delivery_in_progress() -> None:
    deliveries, metrics = held()
    msgs = [msg() for _ in range(3)]
    for m in msgs:
        deliveries.hold(uuid.uuid4(), m)
    await deliveries.sweep()
    await deliveries.sweep()
    assert [m.progress for m in msgs] == [2, 2, 2]
    assert metrics.progress_acks._value.get() == 6


def test_finals_are_forgotten_after_their_time_and_beyond_the_limit() -> None:
    finals = FinalOutcomes(keep_s=60.0, limit=3)
    old = uuid.uuid4()
    finals.add(old, now=0.0)
    assert old in finals
    fresh = uuid.uuid4()
    finals.add(fresh, now=61.0)
    assert old not in finals
    assert fresh in finals
    for _ in range(3):
        finals.add(uuid.uuid4(), now=61.0)
    assert len(finals) == 3
    assert fresh not in finals  # the oldest went first


async def test_a_delivery_held_long_past_its_expiry_is_given_back() -> None:
    # Its answer was lost (its controller closed while the mower worked on it): held for
    # ever, it would hold the consumer's ack floor.
    deliveries, _ = held()
    lost, running = uuid.uuid4(), uuid.uuid4()
    lost_msg, running_msg = msg(), msg()
    deliveries.hold(lost, lost_msg, expires_at=1000.0)
    again = msg(2)
    deliveries.hold(lost, again)  # a redelivery keeps the first delivery's expiry
    deliveries.hold(running, running_msg, expires_at=1100.0)
    await deliveries.sweep(now=1000.0 + 119)
    assert lost in deliveries
    await deliveries.sweep(now=1000.0 + 121)
    assert lost not in deliveries
    assert (lost_msg.settled, again.settled) == ([], ["nak"])  # admission decides again
    assert running in deliveries
    assert running_msg.progress == 2


def _finished(metrics: GatewayMetrics, before_expiry: str) -> float:
    return metrics.finished.labels(before_expiry)._value.get()


async def test_a_final_result_is_counted_by_whether_it_came_before_the_command_expired() -> None:
    deliveries, metrics = held()
    assert (_finished(metrics, "true"), _finished(metrics, "false")) == (0, 0)
    in_time, late, unheld = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    now = time.time()
    deliveries.hold(in_time, msg(), now + 60)
    deliveries.hold(late, msg(), now - 1)
    deliveries.finished(in_time)
    deliveries.finished(late)
    deliveries.finished(unheld)  # not held here (an earlier process's): not counted
    assert (_finished(metrics, "true"), _finished(metrics, "false")) == (1, 1)
    await deliveries.flush()
