"""Concurrent takes of one key answered together: one store write per key at a time.

A service's hot path sends many takes of one key at once (an account's commands from
many requests). Written one by one, each is a round trip, and every write of one row
queues on its lock behind the others. Here a key has at most one write in flight; the
takes that arrive meanwhile wait for the next, which takes all of them at once
(``TokenStore.take_many``): the first ones pass as far as there are whole tokens, the
rest are refused, as if they had come one after another at the batch's latest instant.
Batches grow with the load and a lone take waits for one write only (the pattern of the
command journal, ``fleet/issuing.py``).

With a ``timeout``, a batch that has no answer that long after its first take fails its
takes as unavailable (one timer per batch, not one per take: the hot path's cost).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from mowdeck.kit.background import cancel_and_wait
from mowdeck.kit.logging import service_context
from mowdeck.kit.ratelimit._bucket import ALLOWED, Limit, Verdict, refused
from mowdeck.kit.ratelimit._ports import Limiter, LimiterUnavailableError, TokenStore

__all__ = ["BatchingLimiter"]


@dataclass
class _Batch:
    limit: Limit
    now: float
    waiters: list[asyncio.Future[Verdict]] = field(default_factory=list)
    deadline: asyncio.TimerHandle | None = None


class BatchingLimiter(Limiter):
    """``store``'s buckets, each key written by one task at a time with every take waiting;
    a batch unanswered ``timeout`` seconds after its first take fails as unavailable."""

    def __init__(self, store: TokenStore, *, timeout: float | None = None) -> None:
        self._store = store
        self._timeout = timeout
        self._batches: dict[str, _Batch] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    async def take(self, key: str, limit: Limit, now: float) -> Verdict:
        """Take one token from ``key``'s bucket, in the key's next write."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Verdict] = loop.create_future()
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = _Batch(limit, now)
            if self._timeout is not None:
                batch.deadline = loop.call_later(
                    self._timeout, self._give_up, key, batch, context=service_context()
                )
        else:
            batch.limit, batch.now = limit, max(batch.now, now)
        batch.waiters.append(future)
        if key not in self._writers:
            # The key's writer answers every take of the batch, not only this one: it logs
            # without the ids of the request that happened to start it.
            self._writers[key] = loop.create_task(
                self._write(key), name="ratelimit-write", context=service_context()
            )
        return await future

    async def _write(self, key: str) -> None:
        waiting: list[asyncio.Future[Verdict]] = []
        try:
            while (batch := self._batches.pop(key, None)) is not None:
                # A take given up meanwhile (its caller's timeout) takes no token.
                waiting = [f for f in batch.waiters if not f.done()]
                if not waiting:
                    if batch.deadline is not None:
                        batch.deadline.cancel()
                    continue
                try:
                    tokens, granted = await self._store.take_many(
                        key, batch.limit, batch.now, len(waiting)
                    )
                except LimiterUnavailableError as err:
                    _fail(waiting, err)
                    continue
                finally:
                    if batch.deadline is not None:
                        batch.deadline.cancel()
                refusal = refused(tokens, batch.limit)
                for n, future in enumerate(waiting):
                    if not future.done():
                        future.set_result(ALLOWED if n < granted else refusal)
        finally:
            self._writers.pop(key, None)
            # Cancelled (closing) or failed: nobody may wait for a write that will not come.
            left = self._batches.pop(key, None)
            _fail(waiting + (left.waiters if left is not None else []), _closed())

    def _give_up(self, key: str, batch: _Batch) -> None:
        # Takes that come later start a batch (and a deadline) of their own.
        if self._batches.get(key) is batch:
            del self._batches[key]
        timeout = self._timeout
        _fail(
            batch.waiters,
            LimiterUnavailableError(f"rate limit store: no answer within {timeout} s"),
        )

    async def expire(self, now: float) -> int:
        """The store's expiry."""
        return await self._store.expire(now)

    async def close(self) -> None:
        """Stop every write in flight; the takes waiting fail as unavailable."""
        for task in list(self._writers.values()):
            await cancel_and_wait(task)
        # A writer cancelled before it first ran has no ``finally`` to run.
        self._writers.clear()
        for batch in self._batches.values():
            _fail(batch.waiters, _closed())
        self._batches.clear()


def _closed() -> LimiterUnavailableError:
    return LimiterUnavailableError("rate limiter closed")


def _fail(futures: list[asyncio.Future[Verdict]], err: LimiterUnavailableError) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(err)
