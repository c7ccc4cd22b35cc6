"""Closing the shard's controllers, and the barrier before shutdown waits on their work."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

import structlog

from actors import LoopBridge
from mowdeck.gateway.actor import Close, Heartbeat
from mowdeck.gateway.routing import ControllerRouter

__all__ = ["ControllerClosing"]

log = structlog.get_logger("mowdeck.gateway.closing")


class ControllerClosing:
    """Asks the router's controllers to decide what they were told, or to close."""

    def __init__(self, router: ControllerRouter, bridge: LoopBridge) -> None:
        self._router = router
        self._bridge = bridge

    async def barrier(self, mower_ids: Iterable[uuid.UUID]) -> None:
        """Until every command told before this point is decided and its effects performed."""
        router = self._router
        router.flush()
        await router.wait_held(10.0)  # messages waiting for a restarted controller go first
        refs = [router.controller(m) for m in mower_ids]
        await asyncio.gather(
            *(self._bridge.ask(r, Heartbeat(), timeout=5.0) for r in refs if r is not None),
            return_exceptions=True,
        )
        # The answers can overtake the decisions' effects, which the handoff passes on a
        # slice per loop turn: perform the rest now, so every command accepted before the
        # barrier is pending before anyone waits for the pending set to empty.
        router.handoff.flush()

    async def close(self, mower_id: uuid.UUID, reason: str) -> None:
        """Close one mower's controller (ending its drive session, reporting it disconnected)."""
        self._router.flush()  # what was told before must be decided before the close
        ref = self._router.controller(mower_id)
        if ref is None:
            return
        try:
            await self._bridge.ask(ref, Close(reason), timeout=5.0)
        except Exception as err:
            log.warning("controller did not close", mower_id=str(mower_id), error=str(err))

    async def close_all(self, mower_ids: Iterable[uuid.UUID], reason: str) -> None:
        """Close every controller; their last effects are performed before this returns."""
        await asyncio.gather(*(self.close(m, reason) for m in list(mower_ids)))
        self._router.handoff.flush()  # before anyone waits for their work
