"""``kit.periodic``: rounds on a timer, at once when woken, a failure never the last."""

from __future__ import annotations

import asyncio

import structlog

from mowdeck.kit.periodic import Periodic


class Rounds:
    """Records when each round ran (the loop's time) and wakes a waiter per round."""

    def __init__(self, *, fail_first: bool = False, hold: asyncio.Event | None = None) -> None:
        self.at: list[float] = []
        self.ran = asyncio.Event()
        self._fail_first = fail_first
        self._hold = hold

    async def __call__(self) -> None:
        self.at.append(asyncio.get_running_loop().time())
        self.ran.set()
        if self._hold is not None:
            await self._hold.wait()
        if self._fail_first and len(self.at) == 1:
            raise RuntimeError("round failed")

    async def next(self, timeout: float = 5.0) -> float:
        await asyncio.wait_for(self.ran.wait(), timeout)
        self.ran.clear()
        return self.at[-1]


async def test_rounds_run_every_interval_and_a_failed_one_is_logged() -> None:
    rounds = Rounds(fail_first=True)
    timer = Periodic("test", 0.05, rounds)
    with structlog.testing.capture_logs() as logs:
        timer.start()
        try:
            await rounds.next()
            await rounds.next()  # the next round came although the first failed
        finally:
            await timer.stop()
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["periodic round failed"]
    assert timer.task is None


async def test_a_wake_runs_a_round_at_once_and_does_not_put_off_the_timed_one() -> None:
    loop = asyncio.get_running_loop()
    rounds = Rounds()
    timer = Periodic("test", 0.6, rounds)
    started = loop.time()
    timer.start()
    try:
        await asyncio.sleep(0.2)  # paces the test: the wake comes before the timed round
        timer.wake()
        woken = await rounds.next()
        assert woken - started < 0.5  # at once, not at the interval
        timed = await rounds.next()
        # Due 0.6 s after the start: a woken round that reset the timer would put it at
        # 0.8 s or later.
        assert timed - started < 0.75
    finally:
        await timer.stop()


async def test_wakes_during_a_round_ask_for_one_more_round() -> None:
    hold = asyncio.Event()
    rounds = Rounds(hold=hold)
    timer = Periodic("test", 60, rounds)
    timer.start()
    try:
        timer.wake()
        await rounds.next()  # the first round runs, held
        for _ in range(5):
            timer.wake()
        hold.set()
        await rounds.next()  # one more for the five wakes
        timer.wake()  # the sentinel: its round comes after whatever the five asked for
        await rounds.next()
        assert len(rounds.at) == 3
    finally:
        await timer.stop()
