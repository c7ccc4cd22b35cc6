"""The mower directory: seeded from Fleet at start, kept by Fleet's events (events win)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

import structlog
from nats.aio.msg import Msg

from contracts.v1 import ContractError, MowerRegistration, decode_event
from mowdeck.kit.bus import Bus
from mowdeck.kit.consumer import DropMessage
from mowdeck.kit.logging import bind
from mowdeck.kit.seed import FleetSeed
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.ports import TelemetryStore

__all__ = ["DirectoryEvents", "directory_seed"]

log = structlog.get_logger("mowdeck.telemetry.directory")

Sleep = Callable[[float], Awaitable[object]]


def directory_seed(
    bus: Bus,
    store: TelemetryStore,
    *,
    timeout: float,
    retry_initial: float = 1.0,
    retry_max: float = 30.0,
    sleep: Sleep = asyncio.sleep,
) -> FleetSeed:
    """The seed that asks Fleet for every mower (shard 0 of 1) until it answers.

    The kit's ``FleetSeed`` retries whatever fails (the seed is the only one there is, and
    a task that died would leave the directory to the events without a word); the
    store's SQL lets every event win over the list's older pairs.
    """

    async def add_pairs(registrations: list[MowerRegistration]) -> int:
        return await store.seed_directory([(m.mower_id, m.account_id) for m in registrations])

    return FleetSeed(
        bus,
        apply_list=add_pairs,
        request_timeout=timeout,
        retry_initial=retry_initial,
        retry_max=retry_max,
        sleep=sleep,
        name="telemetry-directory-seed",
    )


class DirectoryEvents:
    """Applies ``mower.registered|updated|removed``; a removal purges the mower's data."""

    def __init__(
        self,
        store: TelemetryStore,
        metrics: TelemetryMetrics,
        on_removed: Callable[[uuid.UUID], Awaitable[object]] | None = None,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._on_removed = on_removed

    async def handle(self, msg: Msg) -> None:
        """Handle one event message (raise ``DropMessage`` for a malformed one)."""
        try:
            event = decode_event(msg.data, subject=msg.subject)
        except ContractError as err:
            self._metrics.dropped.labels(reason="malformed").inc()
            raise DropMessage(f"malformed event: {err}") from err
        if event.type in ("mower.registered", "mower.updated"):
            payload = event.payload
            bind(mower_id=payload.mower_id, account_id=payload.account_id)
            await self._store.register_mower(
                payload.mower_id, payload.account_id, event.occurred_at
            )
            log.info("directory updated", mower_id=str(payload.mower_id), type=event.type)
        elif event.type == "mower.removed":
            mower_id = event.payload.mower_id
            bind(mower_id=mower_id)
            deleted = await self._store.remove_mower(mower_id, event.occurred_at)
            if self._on_removed is not None:
                await self._on_removed(mower_id)
            log.info("mower purged", mower_id=str(mower_id), rows=deleted)
