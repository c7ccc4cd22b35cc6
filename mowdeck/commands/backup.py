"""``mowdeck backup FOLDER``: snapshots of the streams, with their consumers (an admin step).

Every stream of the contracts and the deny-list's bucket are written to ``FOLDER`` through
the JetStream API (``kit/snapshots.py``); the operations guide (docs/operations.md, "Backup
and restore") says in which order to take them with the PostgreSQL dump, and what a
restore loses.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import nats.errors

from contracts.v1.subjects import STREAMS
from mowdeck.authn import load_auth_settings
from mowdeck.errors import MowdeckError
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.settings import BaseSettings, load_settings
from mowdeck.kit.snapshots import SnapshotError, snapshot_stream

__all__ = ["backed_up_streams", "configure", "connect_admin", "run"]

CONNECT_TIMEOUT_SECONDS = 10.0


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck backup``."""
    parser.add_argument("folder", type=Path, help="where the snapshots are written")


def backed_up_streams() -> list[str]:
    """The streams a backup holds: the contracts' and the deny-list's bucket."""
    return [*(s.name for s in STREAMS), f"KV_{load_auth_settings().denylist_bucket}"]


async def connect_admin(settings: BaseSettings, name: str) -> Bus:
    """A bus as the admin user; a ``SnapshotError`` when NATS cannot be reached in time."""
    try:
        # Bus.connect waits for NATS for ever (right for a service, wrong for a command).
        return await asyncio.wait_for(
            Bus.connect(
                settings.nats_url,
                name=name,
                credentials=NatsCredentials.from_settings(settings),
                user="admin",
            ),
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (TimeoutError, MowdeckError) as err:
        raise SnapshotError(f"cannot reach NATS at {settings.nats_url}: {err!r}") from err


async def run(args: argparse.Namespace) -> int:
    """Snapshot every stream into the folder and say what each holds."""
    settings = load_settings(BaseSettings)
    configure_logging(settings.log_level, settings.log_format)
    bus = await connect_admin(settings, "mowdeck-backup")
    try:
        for stream in backed_up_streams():
            state = await snapshot_stream(bus.nc, stream, args.folder)
            print(
                f"{stream}: {state.get('messages', 0)} messages, sequences"
                f" {state.get('first_seq', 0)}..{state.get('last_seq', 0)},"
                f" {state.get('consumer_count', 0)} consumers"
            )
    except nats.errors.Error as err:
        raise SnapshotError(f"backup failed: {err!r}") from err
    finally:
        await bus.drain()
    return 0
