"""One outcome per command id, for adapters whose devices do not de-duplicate.

A command is delivered at least once; a device protocol without ids of its own (an
MQTT action, a cloud API's request) would carry out a redelivery twice. ``CommandOnce``
answers a second send of an id while the first runs with the first's outcome when it
comes, and one after it with the outcome remembered (the latest ``remembered`` ids).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from mowdeck.gateway.connections.port import CommandOutcome

__all__ = ["REMEMBERED", "CommandOnce"]

REMEMBERED = 256  # command outcomes kept per mower, for redelivered command ids


class CommandOnce:
    """The outcomes of one mower's commands, each carried out once."""

    def __init__(self, remembered: int = REMEMBERED) -> None:
        self._remembered = remembered
        self._pending: dict[uuid.UUID, asyncio.Future[CommandOutcome]] = {}
        self._done: OrderedDict[uuid.UUID, CommandOutcome] = OrderedDict()

    def known(self, command_id: uuid.UUID) -> CommandOutcome | None:
        """The outcome of a command carried out before, if remembered."""
        return self._done.get(command_id)

    async def run(
        self,
        command_id: uuid.UUID,
        carry_out: Callable[[asyncio.Future[CommandOutcome]], Awaitable[CommandOutcome]],
        *,
        timeout: float,
        timed_out: Callable[[float], Exception],
    ) -> CommandOutcome:
        """Carry out ``command_id`` (``carry_out`` gets the future its confirmation may
        settle), or wait up to ``timeout`` for the send of it under way (``timed_out``
        makes the error then)."""
        fut = self._pending.get(command_id)
        if fut is not None:
            try:
                return await asyncio.wait_for(asyncio.shield(fut), timeout)
            except TimeoutError:
                raise timed_out(timeout) from None
        fut = self._pending[command_id] = asyncio.get_running_loop().create_future()
        try:
            outcome = await carry_out(fut)
        except Exception as err:
            # A second send of this id waiting meanwhile hears the same.
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            self._pending.pop(command_id, None)
        if not fut.done():
            fut.set_result(outcome)
        self._done[command_id] = outcome
        while len(self._done) > self._remembered:
            self._done.popitem(last=False)
        return outcome
