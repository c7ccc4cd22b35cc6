"""The micro-batch consumer: batch size, linger, term, nak on a failed commit, ack after it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from nats.errors import MsgAlreadyAckdError
from structlog.testing import capture_logs

from mowdeck.kit import batching
from mowdeck.kit.batching import MicroBatchConsumer, ack_quietly, ack_together, nak_all
from mowdeck.kit.consumer import ConsumerSpec, DropMessage, RetryLater
from tests.support.fakes import FakeMsg

Batched = MicroBatchConsumer[int]


def decode(msg: Any) -> int:
    if not msg.data.isdigit():
        raise DropMessage(f"not a number: {msg.data!r}")
    return int(msg.data)


class Store:
    """Commits batches; ``gate`` holds each commit, ``fail`` makes the next one raise."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate: asyncio.Event | None = None
        self.fail: BaseException | None = None
        self.outcomes: Mapping[int, DropMessage | RetryLater] | None = None
        self.committing = asyncio.Event()  # set once a commit has begun

    async def commit(self, items: list[int]) -> Mapping[int, DropMessage | RetryLater] | None:
        self.committing.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        self.batches.append(items)
        return self.outcomes


def consumer(
    store: Store, *, batch_max: int = 100, linger: float = 0.01
) -> MicroBatchConsumer[int]:
    spec = ConsumerSpec(stream="S", subject="work.>", durable="work")
    return MicroBatchConsumer(
        object(),  # type: ignore[arg-type]  # never started: messages are fed by hand
        spec,
        decode=decode,
        commit=store.commit,
        batch_max=batch_max,
        linger=linger,
        nak_delay=3.0,
    )


async def feed(c: MicroBatchConsumer[int], *payloads: bytes) -> list[FakeMsg]:
    msgs = [FakeMsg(p, "work.item") for p in payloads]
    for msg in msgs:
        await c.on_message(msg)  # type: ignore[arg-type]
    return msgs


async def test_batches_are_cut_at_the_batch_size() -> None:
    store = Store()
    c = consumer(store, batch_max=3)
    msgs = await feed(c, *(str(n).encode() for n in range(7)))
    await c.stop()  # commits what is queued, a batch at a time
    assert store.batches == [[0, 1, 2], [3, 4, 5], [6]]
    assert [m.outcome for m in msgs] == ["ack"] * 7


async def test_a_lone_message_is_committed_after_the_linger() -> None:
    store = Store()
    c = consumer(store, linger=0.1)
    c._loop.start()
    loop = asyncio.get_running_loop()
    started = loop.time()
    (msg,) = await feed(c, b"1")
    while msg.outcome is None:
        await asyncio.sleep(0.005)
    assert 0.1 <= loop.time() - started < 1.0
    assert store.batches == [[1]]
    await c.stop()


async def test_a_full_batch_does_not_wait_for_the_linger() -> None:
    store = Store()
    c = consumer(store, batch_max=2, linger=5.0)
    c._loop.start()
    msgs = await feed(c, b"1", b"2")
    await asyncio.wait_for(_settled(msgs), timeout=1.0)
    assert store.batches == [[1, 2]]
    await c.stop()


async def test_an_undecodable_message_is_terminated_with_its_reason_the_rest_committed() -> None:
    store = Store()
    c = consumer(store)
    with capture_logs() as logs:
        msgs = await feed(c, b"1", b"junk", b"3")
        await c.stop()
    assert [m.outcome for m in msgs] == ["ack", "term", "ack"]
    assert store.batches == [[1, 3]]
    (terminated,) = [e for e in logs if e["event"] == "message terminated"]
    assert "not a number" in terminated["reason"]


async def test_a_failed_commit_naks_the_whole_batch_and_acks_nothing() -> None:
    store = Store()
    store.fail = OSError("database gone")
    c = consumer(store)
    msgs = await feed(c, b"1", b"2", b"3")
    await c.stop()
    assert [(m.outcome, m.nak_delays) for m in msgs] == [("nak", [3.0])] * 3


async def test_a_commit_asking_to_retry_later_gets_its_delay() -> None:
    store = Store()
    store.fail = RetryLater("busy", delay=0.5)
    c = consumer(store)
    msgs = await feed(c, b"1", b"2")
    await c.stop()
    assert [(m.outcome, m.nak_delays) for m in msgs] == [("nak", [0.5])] * 2


async def test_nothing_is_acknowledged_before_the_commit_returned() -> None:
    store = Store()
    store.gate = asyncio.Event()
    c = consumer(store)
    c._loop.start()
    msgs = await feed(c, b"1", b"2")
    await asyncio.wait_for(store.committing.wait(), timeout=1.0)  # the batch is in hand
    assert [m.outcome for m in msgs] == [None, None]
    store.gate.set()
    await asyncio.wait_for(_settled(msgs), timeout=1.0)
    assert [m.outcome for m in msgs] == ["ack", "ack"]
    await c.stop()


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [(DropMessage("refused"), "term"), (RetryLater("later", delay=1.0), "nak")],
    ids=["drop", "retry"],
)
async def test_a_commit_settles_single_items_otherwise(
    outcome: DropMessage | RetryLater, expected: str
) -> None:
    store = Store()
    store.outcomes = {1: outcome}
    c = consumer(store)
    msgs = await feed(c, b"1", b"2", b"3")
    await c.stop()
    assert [m.outcome for m in msgs] == ["ack", expected, "ack"]


async def _settled(msgs: list[FakeMsg]) -> None:
    while any(m.outcome is None for m in msgs):
        await asyncio.sleep(0.005)


async def test_settling_quietly_goes_on_past_a_message_that_fails() -> None:
    refused = FakeMsg(b"1", fail_ack=ConnectionError("closed"))
    acked = [FakeMsg(b"0"), refused, FakeMsg(b"2")]
    await ack_quietly(acked)
    assert [m.outcome for m in acked] == ["ack", None, "ack"]
    naked = [FakeMsg(b"3"), FakeMsg(b"4")]
    await nak_all(naked, 2.5)
    assert [(m.outcome, m.nak_delays) for m in naked] == [("nak", [2.5]), ("nak", [2.5])]


async def test_ack_together_writes_once_and_falls_back_to_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    writes: list[int] = []

    async def one_write(msgs: list[FakeMsg]) -> None:
        writes.append(len(msgs))
        for msg in msgs:
            await msg.ack()

    monkeypatch.setattr(batching, "ack_all", one_write)
    msgs = [FakeMsg(), FakeMsg()]
    await ack_together(msgs)
    await ack_together([])  # nothing to write: no write
    assert writes == [2]
    assert [m.settled for m in msgs] == [["ack"], ["ack"]]


async def test_ack_together_after_a_failed_write_acks_each_and_logs_what_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(msgs: list[FakeMsg]) -> None:
        raise ConnectionError("connection being replaced")

    monkeypatch.setattr(batching, "ack_all", broken)
    # One settled meanwhile (its ack says so: skipped, not an error), one that fails.
    settled = FakeMsg(fail_ack=MsgAlreadyAckdError())
    failing, fine = FakeMsg(fail_ack=RuntimeError("no")), FakeMsg()
    with capture_logs() as logs:
        await ack_together([settled, failing, fine])
    assert fine.settled == ["ack"] and failing.settled == []
    assert [e["event"] for e in logs] == [
        "acknowledging one by one",
        "could not acknowledge a delivery",
    ]
