"""The publish window against a real JetStream, on the fast client and on nats-py's own."""

from __future__ import annotations

import asyncio

import pytest

from mowdeck.kit.bus import Bus
from mowdeck.kit.publish_window import PublishRefusedError, PublishWindow


@pytest.fixture(params=[True, False], ids=["fast", "stock"])
def nats_fast_path(request: pytest.FixtureRequest) -> bool:
    """The ``bus`` fixture on each client: acks read directly, or by a callback."""
    return bool(request.param)


async def test_acks_settle_their_own_futures_and_duplicates_are_stored_once(bus: Bus) -> None:
    publisher = PublishWindow(bus.nc)
    await publisher.start()
    try:
        futures = [
            await publisher.publish(
                f"telemetry.mower.{i % 3}", b"{}", {"Nats-Msg-Id": f"m-{i % 50}"}
            )
            for i in range(200)
        ]
        await asyncio.wait_for(asyncio.gather(*futures), timeout=10)
        assert publisher.in_flight == 0
        assert (await bus.js.stream_info("TELEMETRY")).state.messages == 50
    finally:
        await publisher.stop()


async def test_a_subject_no_stream_takes_is_refused(bus: Bus) -> None:
    publisher = PublishWindow(bus.nc)
    await publisher.start()
    try:
        future = await publisher.publish("nowhere.at.all", b"x", {"Nats-Msg-Id": "x"})
        with pytest.raises(PublishRefusedError):
            await asyncio.wait_for(future, timeout=5)
    finally:
        await publisher.stop()


async def test_a_cancelled_future_is_forgotten(bus: Bus) -> None:
    publisher = PublishWindow(bus.nc)
    await publisher.start()
    try:
        future = await publisher.publish("telemetry.mower.x", b"{}", {"Nats-Msg-Id": "c"})
        future.cancel()
        # Sentinel: a publish behind it on the same connection, whose ack comes after its.
        sentinel = await publisher.publish("telemetry.mower.x", b"{}", {"Nats-Msg-Id": "s"})
        await asyncio.wait_for(sentinel, timeout=5)
        assert publisher.in_flight == 0
    finally:
        await publisher.stop()


async def test_a_publish_that_fails_leaves_nothing_in_flight(bus: Bus) -> None:
    publisher = PublishWindow(bus.nc)
    await publisher.start()
    try:
        # An invalid subject makes nats-py refuse the publish before it is sent, as a
        # closed connection or a full outbound buffer does.
        for _ in range(3):
            with pytest.raises(Exception, match="subject"):
                await publisher.publish("bad subject", b"{}", {"Nats-Msg-Id": "f"})
        await asyncio.sleep(0)
        assert publisher.in_flight == 0
    finally:
        await publisher.stop()
