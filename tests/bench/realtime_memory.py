"""Memory per mower of Realtime's mower entries: 100,000 mowers in 500 accounts.

Three fills, each measured with tracemalloc after a collection: the hub's latest states as
they were kept before the accounts were (one struct per state, its account id decoded
anew each time), Fleet's list alone (``MowerDirectory.assign`` from a decoded
``MowerListReply``, the pages then dropped), and Fleet's list then one state per mower
(``MowerDirectory.report``). The state bodies are one shared bytes object in every fill,
so the figures are what the entries cost beyond the states' JSON.

Run: python -m tests.bench.realtime_memory [--mowers N] [--accounts N]
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from contracts.v1 import MowerListReply, MowerRegistration, decode, encode
from contracts.v1.fleet import Connection
from mowdeck.realtime.accounts import MowerDirectory

BODY = b"{}" * 150  # one object for every state: its size is not what is measured


class _Latest(msgspec.Struct, gc=False):
    """What the hub kept per mower before it kept accounts."""

    data: bytes
    account_id: uuid.UUID
    observed_at: datetime


def _measure(fill: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    kept = fill()
    gc.collect()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return size


def main() -> None:
    """Print the bytes per mower of each fill."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mowers", type=int, default=100_000)
    parser.add_argument("--accounts", type=int, default=500)
    parser.add_argument("--smoke", action="store_true", help="1,000 mowers, for CI")
    args = parser.parse_args()
    n = 1_000 if args.smoke else args.mowers
    mowers = [uuid.uuid4() for _ in range(n)]
    accounts = [uuid.UUID(int=1 + i % args.accounts) for i in range(n)]
    listed = [
        MowerRegistration(mower_id=m, account_id=a, name="m", connection=Connection(kind="sim"))
        for m, a in zip(mowers, accounts, strict=True)
    ]
    page = encode(MowerListReply(mowers=listed, next_after=None))
    # As a state's decoding makes them: new id objects per message.
    reported = [(str(m), str(a)) for m, a in zip(mowers, accounts, strict=True)]
    del listed

    def before() -> object:
        latest = {}
        for m, a in reported:
            latest[uuid.UUID(m)] = _Latest(BODY, uuid.UUID(a), datetime.now(UTC))
        return latest

    def fleet_only() -> MowerDirectory:
        directory = MowerDirectory()
        for registration in decode(page, MowerListReply).mowers:
            directory.assign(registration.mower_id, registration.account_id)
        return directory

    def fleet_and_states() -> object:
        directory = fleet_only()
        for m, a in reported:
            directory.report(uuid.UUID(m), BODY, uuid.UUID(a), datetime.now(UTC))
        return directory

    for name, fill in (
        ("before: latest states only", before),
        ("Fleet's list only", fleet_only),
        ("Fleet's list and a state each", fleet_and_states),
    ):
        print(f"{name:32s} {_measure(fill) / n:7.1f} bytes per mower")


if __name__ == "__main__":
    main()
