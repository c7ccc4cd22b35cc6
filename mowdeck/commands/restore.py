"""``mowdeck restore FOLDER``: streams from a ``mowdeck backup``, before anything else runs.

Each stream of the backup is created from its snapshot, with its consumers and their
positions; a stream that exists already is refused by the server (restore into a fresh
NATS, or delete the stream first). Then ``mowdeck streams`` adds what a backup does not
hold, and the services start (docs/operations.md, "Backup and restore").
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nats.errors

from mowdeck.commands.backup import backed_up_streams, connect_admin
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.settings import BaseSettings, load_settings
from mowdeck.kit.snapshots import SnapshotError, restore_stream

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck restore``."""
    parser.add_argument("folder", type=Path, help="a folder written by `mowdeck backup`")


def _held(folder: Path) -> list[str]:
    return [s for s in backed_up_streams() if (folder / f"{s}.json").exists()]


async def run(args: argparse.Namespace) -> int:
    """Restore every stream the folder holds and say what each holds now."""
    settings = load_settings(BaseSettings)
    configure_logging(settings.log_level, settings.log_format)
    streams = _held(args.folder)
    if not streams:
        raise SnapshotError(f"no stream snapshots in {args.folder}")
    bus = await connect_admin(settings, "mowdeck-restore")
    try:
        for stream in streams:
            state = await restore_stream(bus.nc, stream, args.folder)
            print(
                f"{stream}: {state.get('messages', 0)} messages, sequences"
                f" {state.get('first_seq', 0)}..{state.get('last_seq', 0)},"
                f" {state.get('consumer_count', 0)} consumers"
            )
    except nats.errors.Error as err:
        raise SnapshotError(f"restore failed: {err!r}") from err
    finally:
        await bus.drain()
    return 0
