"""Resuming a client: each stream read again from its position, up to the hub's.

Per resuming client one short-lived ordered consumer per stream, from the sequence after
the client's to the hub's position when the client was registered; live frames meanwhile
wait in the client's buffer, and all of them come after that position. A position the
stream no longer holds (or one from another stream's lifetime) cannot be resumed: the
caller sends a resync and a fresh snapshot instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from contracts.v1.subjects import COMMANDS, EVENTS, TELEMETRY
from mowdeck.kit.wire import delivery
from mowdeck.realtime.client import Client
from mowdeck.realtime.frames import Frame
from mowdeck.realtime.positions import Position, format_position
from mowdeck.realtime.translate import (
    Item,
    alarm_item,
    command_item,
    event_item,
    link_item,
    notification_item,
    state_item,
)

__all__ = ["REPLAY_MAX_FRAMES", "Resync", "replay"]

REPLAY_MAX_FRAMES = 20_000
"""More to replay than this, and a fresh snapshot is cheaper for everyone."""


class Resync(Exception):
    """The position cannot be resumed; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _state(msg: Msg) -> Item | None:
    found = state_item(msg.subject, msg.data)
    return None if found is None else found.item


def _command(msg: Msg) -> Item | None:
    return command_item(msg.subject, msg.data)


def _event(msg: Msg) -> Item | None:
    event = event_item(msg.subject, msg.data)
    if event is None:
        return None
    return link_item(event) or notification_item(event) or alarm_item(event)


_STREAMS: tuple[tuple[str, str, Callable[[Msg], Item | None]], ...] = (
    (TELEMETRY.name, TELEMETRY.subjects[0], _state),
    (COMMANDS.name, COMMANDS.subjects[0], _command),
    (EVENTS.name, EVENTS.subjects[0], _event),
)


async def replay(
    js: JetStreamContext, client: Client, since: Position, until: Position, *, timeout: float
) -> list[Frame]:
    """The client's frames after ``since`` up to ``until``; raises ``Resync``."""
    position = list(since)
    frames: list[Frame] = []
    for index, (stream, subject, translate) in enumerate(_STREAMS):
        start, end = since[index] + 1, until[index]
        if since[index] > end:
            raise Resync("unknown-position")
        if start > end:
            continue
        try:
            info = await js.stream_info(stream)
        except NotFoundError as err:
            raise Resync("unknown-position") from err
        if start < int(info.state.first_seq):
            raise Resync("expired")

        def take(seq: int, item: Item | None, index: int = index) -> None:
            position[index] = seq
            if item is None or item.mower_id not in client.mowers or item.type not in client.types:
                return
            if item.user_id is not None and item.user_id != client.user_id:
                return
            # The client's mowers are its account's; a state also names the account it
            # was reported for, which a mower that moved since does not share.
            if item.account_id is not None and item.account_id != client.account_id:
                return
            id_ = format_position(Position(*position))
            frames.append(Frame(item.type, id_, item.data, item.mower_id, time.monotonic()))
            if len(frames) > REPLAY_MAX_FRAMES:
                raise Resync("too-far-behind")

        await _read(
            js,
            stream=stream,
            subject=subject,
            start=start,
            end=end,
            translate=translate,
            take=take,
            timeout=timeout,
        )
        position[index] = end
    return frames


async def _read(
    js: JetStreamContext,
    *,
    stream: str,
    subject: str,
    start: int,
    end: int,
    translate: Callable[[Msg], Item | None],
    take: Callable[[int, Item | None], None],
    timeout: float,
) -> None:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def on_message(msg: Msg) -> None:
        if done.done():
            return
        seq = delivery(msg.reply)[1]
        if seq > end:
            done.set_result(None)
            return
        try:
            take(seq, translate(msg))
        except Resync as err:
            done.set_exception(err)
            return
        if seq >= end or msg.metadata.num_pending == 0:
            done.set_result(None)

    sub = await js.subscribe(
        subject,
        stream=stream,
        cb=on_message,
        ordered_consumer=True,
        config=api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start
        ),
    )
    try:
        await asyncio.wait_for(done, timeout)
    except TimeoutError as err:
        raise Resync("replay-timeout") from err
    finally:
        # The ephemeral consumer goes with its subscription, also when this fails.
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
