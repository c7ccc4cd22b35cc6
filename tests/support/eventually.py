"""Waiting in tests: for a condition to hold, and for a sentinel to come through."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

__all__ = ["eventually", "sentinel_through"]

T = TypeVar("T")


@overload
async def eventually(
    check: Callable[[], Awaitable[T]],
    timeout: float = 10.0,
    *,
    interval: float = 0.02,
    what: str | None = None,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T],
    timeout: float = 10.0,
    *,
    interval: float = 0.02,
    what: str | None = None,
) -> T: ...


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    timeout: float = 10.0,
    *,
    interval: float = 0.02,
    what: str | None = None,
) -> T:
    """The first truthy value of ``check`` (plain or async), polled every ``interval`` seconds.

    Fails with an ``AssertionError`` naming ``what`` (or the check) and its last value when
    nothing truthy came within ``timeout`` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            name = what or getattr(check, "__qualname__", repr(check))
            raise AssertionError(f"{name}: not met within {timeout} s (last: {value!r})")
        await asyncio.sleep(interval)


async def sentinel_through(
    send: Callable[[], Awaitable[object]],
    arrived: Callable[[], object | Awaitable[object]],
    timeout: float = 10.0,
) -> None:
    """Send a sentinel down an ordered path and wait until it came out at the other end.

    What was sent down the same path before it has then arrived too, or never will: a
    test asserts that something did not arrive only after this, not after a sleep.
    """
    await send()
    await eventually(arrived, timeout, what="the sentinel")
