"""The final results an earlier process stored for deliveries it never acknowledged.

Read once at start, before the shard's consumer delivers anything: a delivery that comes
back after a crash must be acknowledged with no new result if its command was answered
(``rejected`` as preempted, ``expired``, ...) by the process that died before its ack.
Every such result was published after its command, so after the durable consumer's ack
floor: the results stored between that floor and the stream's end are all there is to
read, and when nothing is unacknowledged, there is nothing to read at all.
"""

from __future__ import annotations

import time

import structlog
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError

from contracts.v1 import decode_result
from contracts.v1.subjects import RESULT_FILTER
from mowdeck.gateway.deliveries import FinalOutcomes

__all__ = ["read_stored_finals"]

log = structlog.get_logger("mowdeck.gateway.outcomes")

BATCH = 1000


async def read_stored_finals(
    js: JetStreamContext, *, stream: str, durable: str, finals: FinalOutcomes
) -> int:
    """Add to ``finals`` the command ids with a final result stored since ``durable``'s
    ack floor; returns how many results were read.

    Read while deliveries wait for their acknowledgement (the process before this one
    died holding them), and also while the durable has a backlog it never delivered: a
    shard index unused for a while (the shard count was lower) comes back to commands
    the other shards answered meanwhile, and must not answer them again."""
    started = time.perf_counter()
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        return 0  # a new consumer: nothing was delivered, nothing comes back
    if not info.num_ack_pending and not info.num_pending:
        return 0
    floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
    sub = await js.pull_subscribe(
        RESULT_FILTER,
        stream=stream,
        config=api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=(floor or 0) + 1,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=30.0,
            filter_subject=RESULT_FILTER,
        ),
    )
    read = 0
    try:
        left = (await sub.consumer_info()).num_pending
        while left:
            try:
                msgs = await sub.fetch(min(BATCH, left), timeout=2.0)
            except NatsTimeoutError:
                break
            for msg in msgs:
                read += 1
                try:
                    result = decode_result(msg.data)
                except Exception as err:
                    # Not the gateway's to judge here; the results' consumers settle it.
                    log.debug("undecodable result skipped", error=str(err))
                else:
                    if result.is_final:
                        finals.add(result.command_id)
            left = msgs[-1].metadata.num_pending if msgs else 0
    finally:
        await sub.unsubscribe()
    log.info(
        "stored final results read",
        consumer=durable,
        unacknowledged=info.num_ack_pending,
        results=read,
        ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return read
