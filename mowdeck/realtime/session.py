"""One stream from connect to close: register, snapshot or resume, then live frames."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec
import structlog
from nats.js.client import JetStreamContext

from contracts.v1 import MowerState
from mowdeck.kit.logging import bound
from mowdeck.realtime.client import Client, Sink
from mowdeck.realtime.errors import StatesUnavailableError
from mowdeck.realtime.frames import Frame, frame
from mowdeck.realtime.hub import Hub
from mowdeck.realtime.metrics import RealtimeMetrics
from mowdeck.realtime.positions import Position, format_position
from mowdeck.realtime.replay import Resync, replay
from mowdeck.realtime.stale import LatestStates

__all__ = ["Streams", "close_kind"]

log = structlog.get_logger("mowdeck.realtime.session")

_encoder = msgspec.json.Encoder()


def _utcnow() -> datetime:
    return datetime.now(UTC)


def close_kind(reason: str) -> str:
    """The metric label of a close reason."""
    if reason.startswith("too-far-behind"):
        return "slow"
    if reason.startswith("user-"):
        return "user"
    if reason == "shutdown":
        return "shutdown"
    return "other"


@dataclass
class Streams:
    """What serving a stream needs."""

    hub: Hub
    js: JetStreamContext
    states: LatestStates
    metrics: RealtimeMetrics
    replay_timeout: float
    stale_after: timedelta

    async def serve(
        self, client: Client, sink: Sink, *, since: Position | None, resuming: bool
    ) -> str:
        """Run ``client``'s stream on ``sink`` until it closes; returns the reason.

        ``resuming`` with no ``since`` is an id that names no position: a resync.
        """
        # Every line of the stream, and of what it starts, names its reader.
        with bound(user_id=client.user_id, account_id=client.account_id):
            return await self._serve(client, sink, since=since, resuming=resuming)

    async def _serve(
        self, client: Client, sink: Sink, *, since: Position | None, resuming: bool
    ) -> str:
        hub, metrics = self.hub, self.metrics
        client.conflated_metric = metrics.conflated
        position = hub.register(client)
        try:
            await self._begin(client, sink, position, since=since, resuming=resuming)
            client.go_live()
            reason = await client.run(sink, metrics)
        except (ConnectionError, RuntimeError) as err:
            reason = f"disconnected: {type(err).__name__}"
        finally:
            hub.unregister(client)
        if not reason.startswith("disconnected"):
            kind = close_kind(reason)
            metrics.closes.labels(kind).inc()
            if kind == "slow":
                metrics.slow_closes.inc()
        log.debug("stream ended", user_id=client.user_id, reason=reason)
        return reason

    async def _begin(
        self,
        client: Client,
        sink: Sink,
        position: Position,
        *,
        since: Position | None,
        resuming: bool,
    ) -> None:
        """Write the snapshot, or the replay, or a resync and a snapshot.

        A method of its own so that what it writes (a snapshot is tens of kilobytes) is
        gone once written, not kept alive for the stream's whole life.
        """
        metrics = self.metrics
        held, missing = self.hub.snapshot(client)  # before any wait: as of ``position``
        first: list[Frame]
        try:
            if not resuming:
                first = [await self._snapshot(client, position, held, missing)]
            elif since is None:
                raise Resync("unknown-position")
            else:
                first = await replay(self.js, client, since, position, timeout=self.replay_timeout)
                metrics.resumes.inc()
        except Resync as resync:
            metrics.resyncs.labels(resync.reason).inc()
            body = _encoder.encode({"reason": resync.reason})
            first = [
                frame("resync", format_position(position), body),
                await self._snapshot(client, position, held, missing),
            ]
        if first and client.closed is None:
            await sink.write(first)
            metrics.delivered.inc(len(first))

    async def _snapshot(
        self, client: Client, position: Position, held: list[bytes], missing: set[uuid.UUID]
    ) -> Frame:
        now = _utcnow()
        stale_after = self.stale_after
        hub = self.hub
        parts: list[bytes] = []
        for data in held:
            state = _head.decode(data)
            stale = b"true" if now - state.observed_at > stale_after else b"false"
            parts.append(data.rstrip()[:-1] + b',"stale":' + stale + b"}")
        if missing:
            try:
                older = await self.states.latest(missing, account_id=client.account_id)
            except StatesUnavailableError as err:
                log.warning("latest states unavailable for a snapshot", error=str(err))
                older = []
            for fallback in older:
                mower = fallback.mower_id
                # Whatever the port answered: only the client's mowers, of its account.
                if (
                    hub.observed(mower) is None
                    and mower in client.mowers
                    and fallback.account_id == client.account_id
                ):
                    parts.append(_stale(fallback))
        mowers = _encoder.encode(sorted(str(m) for m in client.mowers))
        body = b'{"mowers":%s,"states":[%s]}' % (mowers, b",".join(parts))
        return Frame("snapshot", format_position(position), body, None, time.monotonic())


class _Head(msgspec.Struct):
    observed_at: datetime


_head = msgspec.json.Decoder(_Head)


def _stale(state: MowerState) -> bytes:
    return _encoder.encode(state)[:-1] + b',"stale":true}'
