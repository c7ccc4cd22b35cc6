"""Shard-list replies cut by size, and an error reply when the reply cannot be sent."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from contracts.v1 import (
    Connection,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    encode,
)
from mowdeck.fleet.listing import MowerListResponder, within
from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.ports import MowerRecord
from mowdeck.fleet.rules import registry_event
from tests.support.fakes import FakeBus, FakeMsg, FakeNats

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def reg(i: int, size: int = 100) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.UUID(int=i),
        account_id=uuid.UUID(int=0),
        name="M",
        connection=Connection(kind="simulator", options={"blob": "x" * size}),
    )


ONE = len(encode(reg(1)))  # every registration of reg() encodes to this size


@pytest.mark.parametrize(
    ("sizes", "budget", "ids", "next_after"),
    [
        ([100] * 5, 10_000, [1, 2, 3, 4, 5], None),
        ([100] * 5, 3 * (ONE + 1) + 80, [1, 2, 3], 3),
        ([100] * 5, ONE + 80, [1], 1),
        ([100, 5000, 100], 3 * (ONE + 1) + 80, [1, 3], None),
        ([5000, 100, 100], 2 * (ONE + 1) + 80, [2, 3], None),
        ([100, 5000, 100, 100], 2 * (ONE + 1) + 80, [1, 3], 3),
    ],
    ids=["fits", "cut", "one-per-page", "too-large-passed", "first-too-large", "cut-after-pass"],
)
def test_a_page_is_cut_to_the_budget(
    sizes: list[int], budget: int, ids: list[int], next_after: int | None
) -> None:
    reply = MowerListRequest().answer([reg(i + 1, size) for i, size in enumerate(sizes)])
    cut, passed = within(reply, budget)
    assert [m.mower_id.int for m in cut.mowers] == ids
    assert (cut.next_after.int if cut.next_after else None) == next_after
    assert len(encode(cut)) <= budget
    assert all(len(encode(r)) > budget for r in passed)


def test_a_page_cut_from_a_page_with_more_keeps_the_caller_paging() -> None:
    reply = MowerListRequest(limit=3).answer([reg(i) for i in range(1, 6)])
    assert reply.next_after == uuid.UUID(int=3)
    cut, _ = within(reply, 10_000)
    assert cut == reply


def request() -> FakeMsg:
    """A list request with an inbox to reply to."""
    return FakeMsg(b"{}", "fleet.mowers.list", reply="_INBOX.1")


async def responder(fail: int) -> tuple[MowerListResponder, FakeNats, CollectorRegistry]:
    repo = InMemoryMowerRepository()
    registration = reg(1)
    await repo.add(
        MowerRecord(registration, NOW, NOW),
        registry_event("mower.registered", registration, now=NOW),
    )
    bus, registry = FakeBus(fail_core=fail), CollectorRegistry()
    return MowerListResponder(bus, repo, registry), bus.nc, registry  # type: ignore[arg-type]


async def test_a_reply_that_cannot_be_sent_gets_the_503_error_reply() -> None:
    listing, nc, registry = await responder(fail=1)
    await listing._on_request(request())
    ((_, body, headers, _),) = nc.published
    assert headers is not None
    assert headers["Nats-Service-Error-Code"] == "503"
    assert msgspec.json.decode(body)["error"]["code"] == 503
    assert registry.get_sample_value("mowdeck_fleet_list_requests_total", {"outcome": "error"})


async def test_an_error_reply_that_cannot_be_sent_either_is_logged_not_raised() -> None:
    listing, nc, _ = await responder(fail=2)
    await listing._on_request(request())
    assert nc.published == []


async def test_a_reply_that_is_sent_is_the_page() -> None:
    listing, nc, _ = await responder(fail=0)
    await listing._on_request(request())
    ((_, body, headers, _),) = nc.published
    assert headers is None
    assert msgspec.json.decode(body, type=MowerListReply).mowers == [reg(1)]
