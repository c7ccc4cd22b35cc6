"""Command results into the timeline: one row per status transition, account from the directory."""

from __future__ import annotations

import structlog
from nats.aio.msg import Msg

from contracts.v1 import ContractError, decode_result
from contracts.v1.subjects import mower_id_from_subject
from mowdeck.kit.consumer import DropMessage, RetryLater, delivery_count
from mowdeck.kit.logging import bind
from mowdeck.telemetry.errors import StoreRejectedError
from mowdeck.telemetry.metrics import TelemetryMetrics
from mowdeck.telemetry.model import TimelineRow
from mowdeck.telemetry.ports import TelemetryStore

__all__ = ["ResultHandler"]

log = structlog.get_logger("mowdeck.telemetry.results")


class ResultHandler:
    """Stores command results; an unknown mower is retried, then dropped with a warning.

    A result the store refuses as data (a NUL character in the reason) is dropped with a
    warning: redelivering it would be refused again, every time.
    """

    def __init__(
        self,
        store: TelemetryStore,
        metrics: TelemetryMetrics,
        *,
        unknown_attempts: int,
        retry_delay: float,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._attempts = unknown_attempts
        self._delay = retry_delay
        self._rows = metrics.rows_written.labels(table="command_timeline")

    def _drop(self, reason: str, detail: str) -> DropMessage:
        self._metrics.dropped.labels(reason=reason).inc()
        return DropMessage(f"{reason}: {detail}")

    async def handle(self, msg: Msg) -> None:
        """Handle one result message (``DropMessage``/``RetryLater`` settle it otherwise)."""
        try:
            result = decode_result(msg.data)
            subject_mower = mower_id_from_subject(msg.subject)
        except ContractError as err:
            raise self._drop("malformed", str(err)) from err
        # For the rest of the message (``settle``'s scope), its settling line included.
        bind(mower_id=result.mower_id, command_id=result.command_id)
        if subject_mower != result.mower_id:
            raise self._drop("subject-mismatch", f"{msg.subject} carries {result.mower_id}")
        account = await self._store.directory_account(result.mower_id)
        if account is None:
            attempt = delivery_count(msg)
            if attempt >= self._attempts:
                log.warning(
                    "result for unknown mower dropped",
                    mower_id=str(result.mower_id),
                    command_id=str(result.command_id),
                    deliveries=attempt,
                )
                raise self._drop("unknown-mower", str(result.mower_id))
            raise RetryLater(f"mower {result.mower_id} not in the directory yet", self._delay)
        row = TimelineRow(
            command_id=result.command_id,
            status=result.status,
            mower_id=result.mower_id,
            account_id=account,
            at=result.at,
            reason=result.reason,
            kind=result.kind,
        )
        try:
            stored = await self._store.add_timeline(row)
        except StoreRejectedError as err:
            log.warning(
                "result refused by the store, dropped",
                mower_id=str(result.mower_id),
                command_id=str(result.command_id),
                status=result.status,
                error=str(err),
            )
            raise self._drop("rejected-by-store", str(err)) from err
        if stored:
            self._metrics.results_stored.inc()
            self._rows.inc()
