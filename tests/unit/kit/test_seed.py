"""The Fleet seed: retries until Fleet answers, and events win over the list's older copy."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from contracts.v1 import (
    Connection,
    EventEnvelope,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    encode,
)
from mowdeck.kit.bus import Bus, BusError
from mowdeck.kit.seed import FleetSeed
from tests.support.fakes import FakeBus, FakeMsg

pytestmark = pytest.mark.timeout(10)

ACCOUNT = uuid.UUID(int=1)


def registration(n: int, name: str = "listed", url: str = "ws://a") -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.UUID(int=n),
        account_id=ACCOUNT,
        name=name,
        connection=Connection(kind="simulator", options={"url": url}),
    )


def flaky_fleet(failures: int, mowers: list[MowerRegistration]) -> FakeBus:
    """A bus whose ``fleet.mowers.list`` fails ``failures`` times, in several ways, then answers."""
    ways: list[bytes | BaseException] = [
        BusError("no answer on fleet.mowers.list: TimeoutError"),
        b'{"mowers": "not a list"}',  # a malformed page
        RuntimeError("connection being replaced"),  # not a BusError
    ]
    return FakeBus(
        replies=[ways[n % 3] for n in range(failures)],
        reply=encode(MowerListReply(mowers=mowers)),
    )


class Sleeps:
    """Records the backoff instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class Applied:
    """What the seed applied and removed, in order."""

    def __init__(self) -> None:
        self.mowers: dict[uuid.UUID, MowerRegistration] = {}
        self.log: list[tuple[str, uuid.UUID]] = []

    async def apply(self, registration: MowerRegistration) -> None:
        self.mowers[registration.mower_id] = registration
        self.log.append(("apply", registration.mower_id))

    async def remove(self, mower_id: uuid.UUID) -> None:
        self.mowers.pop(mower_id, None)
        self.log.append(("remove", mower_id))


async def test_the_seed_retries_from_1_s_doubling_to_30_s_until_fleet_answers() -> None:
    sleep, applied, retries = Sleeps(), Applied(), []
    mower = registration(7)
    bus: Bus = flaky_fleet(failures=8, mowers=[mower])  # type: ignore[assignment]
    seed = FleetSeed(
        bus,
        apply=applied.apply,
        request_timeout=2.0,
        on_retry=lambda: retries.append(1),
        sleep=sleep,
    )
    with structlog.testing.capture_logs() as logs:
        assert await seed.run() == 1
    assert sleep.delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert len(retries) == 8
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [w["attempt"] for w in warnings] == list(range(1, 9))
    assert all(w["error"] for w in warnings)
    assert list(applied.mowers.values()) == [mower]
    assert seed.seeded.is_set()


class PagedFleet:
    """Answers ``fleet.mowers.list`` in pages of one, each only once ``release`` is set."""

    def __init__(self, mowers: list[MowerRegistration]) -> None:
        self.mowers = mowers
        self.asked: list[MowerListRequest] = []
        self.release = asyncio.Event()
        self.js = self
        self.event_cb: Any = None

    async def request(self, subject: str, message: Any, *, timeout: float) -> bytes:
        self.asked.append(message)
        await self.release.wait()
        after = -1 if message.after is None else message.after.int
        page = [m for m in self.mowers if m.mower_id.int > after][:1]
        more = bool(page) and page[0] != self.mowers[-1]
        return encode(MowerListReply(mowers=page, next_after=page[0].mower_id if more else None))

    async def subscribe(self, subject: str, **options: Any) -> Any:
        self.event_cb = options["cb"]
        return self

    async def unsubscribe(self) -> None:
        self.event_cb = None

    async def event(self, type_: str, payload: MowerRegistration) -> None:
        envelope = EventEnvelope.new(
            type=type_, payload=payload, producer="fleet", now=datetime.now(UTC)
        )
        await self.event_cb(FakeMsg(encode(envelope), f"event.{type_}"))


@pytest.mark.parametrize(
    "event",
    ["mower.updated", "mower.registered", "mower.removed"],
    ids=["updated", "registered", "removed"],
)
async def test_an_event_while_the_list_is_pending_wins_over_the_lists_older_copy(
    event: str,
) -> None:
    old = registration(1, name="old name", url="ws://old")
    other = registration(2)
    fleet = PagedFleet([old, other])
    applied = Applied()
    bus: Bus = fleet  # type: ignore[assignment]
    seed = FleetSeed(
        bus,
        apply=applied.apply,
        remove=applied.remove,
        follow_events=True,
        request_timeout=1.0,
        shard_index=1,
        shard_count=3,
    )
    task = await seed.start()
    await asyncio.sleep(0)
    assert fleet.asked[0] == MowerListRequest(shard_index=1, shard_count=3)
    newer = registration(1, name="new name", url="ws://new")
    await fleet.event(event, newer)  # while the list (with the old copy) is pending
    fleet.release.set()
    assert await task == 1  # only the other mower came from the list
    if event == "mower.removed":
        assert uuid.UUID(int=1) not in applied.mowers
    else:
        assert applied.mowers[uuid.UUID(int=1)] == newer
    assert applied.mowers[uuid.UUID(int=2)] == other
    assert seed.healthy
    # Once seeded, events apply as they come.
    renamed = registration(1, name="later")
    await fleet.event("mower.updated", renamed)
    assert applied.mowers[uuid.UUID(int=1)] == renamed
    await seed.stop()
    assert fleet.event_cb is None


async def test_a_listed_mower_that_fails_is_skipped_and_the_others_load() -> None:
    mowers = [registration(n) for n in range(1, 5)]
    bus: Bus = flaky_fleet(failures=0, mowers=mowers)  # type: ignore[assignment]
    loaded: list[uuid.UUID] = []

    async def apply(r: MowerRegistration) -> None:
        if r.mower_id.int == 2:
            raise RuntimeError("a bug")
        loaded.append(r.mower_id)

    seed = FleetSeed(bus, apply=apply, request_timeout=1.0)
    assert await seed.run() == 3
    assert [m.int for m in loaded] == [1, 3, 4]


def healthy(seed: FleetSeed) -> bool:
    return seed.healthy


async def test_a_seed_task_that_ended_without_seeding_is_unhealthy() -> None:
    async def apply_list(registrations: list[MowerRegistration]) -> int:
        return len(registrations)

    done = FleetSeed(flaky_fleet(0, []), apply_list=apply_list, request_timeout=1.0)  # type: ignore[arg-type]
    assert healthy(done)  # not started
    assert await (await done.start()) == 0
    assert healthy(done)  # done is not dead

    fleet = PagedFleet([])  # never answers
    dying = FleetSeed(fleet, apply_list=apply_list, request_timeout=1.0)  # type: ignore[arg-type]
    task = await dying.start()
    await asyncio.sleep(0)
    assert healthy(dying)  # still asking
    task.cancel()  # as if a bug had ended it
    await asyncio.gather(task, return_exceptions=True)
    assert not healthy(dying)
    await dying.stop()
    assert healthy(dying)  # stopping is not dying


def test_a_seed_takes_exactly_one_way_to_apply_the_list() -> None:
    bus: Bus = flaky_fleet(failures=0, mowers=[])  # type: ignore[assignment]
    with pytest.raises(ValueError, match="exactly one"):
        FleetSeed(bus, request_timeout=1.0)
