"""A task cancelled inside nats-py can carry on; ``cancel_and_wait`` ends it anyway.

nats-py's ``_flush_pending`` catches ``CancelledError``: a publish that waits for its
buffer to be written (more than ``pending_size`` unwritten, a server that does not read)
swallows the cancellation and returns, and the task goes on to its next wait. A service's
``stop()`` that cancels such a task once and then awaits it would wait for ever; every
stop in the services goes through ``kit.background.cancel_and_wait`` instead.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
from nats.aio.client import Client as NATS

from mowdeck.kit.background import cancel_and_wait
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer

PENDING_SIZE = 64 * 1024
PAYLOAD = b"x" * 60_000


def _awaiting(task: asyncio.Task[Any]) -> list[str]:
    """The coroutines ``task`` is suspended in, outermost first."""
    names: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None and hasattr(coro, "cr_code"):
        names.append(coro.cr_code.co_name)
        coro = coro.cr_await
    return names


def _unwritten(nc: NATS) -> int:
    writer = nc._transport._io_writer  # type: ignore[union-attr]
    return int(writer.transport.get_write_buffer_size())


@pytest.fixture
async def stopped_server(own_nats_server: NatsServer) -> AsyncIterator[tuple[NatsServer, NATS]]:
    """A stock client connected to a server that is then stopped (SIGSTOP), and resumed after."""
    nc = NATS()
    await nc.connect(
        own_nats_server.url, pending_size=PENDING_SIZE, flush_timeout=60, allow_reconnect=False
    )
    os.kill(own_nats_server.pid, signal.SIGSTOP)
    try:
        yield own_nats_server, nc
    finally:
        os.kill(own_nats_server.pid, signal.SIGCONT)
        await nc.close()


async def _publisher(nc: NATS, went_on: asyncio.Event) -> None:
    # Publishes until the socket is full and a publish waits for its flush; after that
    # it waits for good, as a service's loop waits for its next piece of work.
    for _ in range(1_000):
        await nc.publish("cancellation.test", PAYLOAD)
    went_on.set()
    await asyncio.Event().wait()


async def test_nats_py_swallows_a_cancellation_while_a_publish_waits_for_its_flush(
    stopped_server: tuple[NatsServer, NATS],
) -> None:
    server, nc = stopped_server
    went_on = asyncio.Event()
    task = asyncio.create_task(_publisher(nc, went_on))
    await eventually(
        lambda: "_flush_pending" in _awaiting(task) and _unwritten(nc) > 0,
        what="a publish waiting for its flush to a server that does not read",
    )
    task.cancel()
    os.kill(server.pid, signal.SIGCONT)  # the flush completes; the publish returns
    # The cancellation was swallowed: the task went on publishing, then to its next wait.
    await asyncio.wait_for(went_on.wait(), timeout=30.0)
    assert not task.done()
    assert await cancel_and_wait(task, timeout=5.0)
    assert task.cancelled()
