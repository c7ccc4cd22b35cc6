"""Stream snapshots through the JetStream API: what ``mowdeck backup`` and ``restore`` use.

nats-py has no snapshot helper, so this speaks the server's API directly (the one the
``nats`` CLI uses): ``$JS.API.STREAM.SNAPSHOT.<stream>`` answers with the stream's config
and state and then sends the snapshot (an s2-compressed tar of the stream's files and its
consumers' state) in chunks, each acknowledged by a reply, the last one empty;
``$JS.API.STREAM.RESTORE.<stream>`` takes the config and state, then the chunks, each
acknowledged, and an empty message that ends it and answers with the new stream.

A snapshot is two files per stream in one folder: ``<stream>.json`` (config and state,
as the server gave them) and ``<stream>.snapshot`` (the chunks, as they came).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from mowdeck.errors import MowdeckError

__all__ = ["SnapshotError", "restore_stream", "snapshot_stream"]

CHUNK_BYTES = 128 * 1024
API_TIMEOUT_S = 10.0
# A chunk comes within this of the previous one, or the snapshot failed.
CHUNK_TIMEOUT_S = 30.0


class SnapshotError(MowdeckError):
    """The server refused or broke off a snapshot or a restore."""


def _answer(msg: Msg, what: str) -> dict[str, Any]:
    try:
        body: dict[str, Any] = json.loads(msg.data)
    except ValueError as err:
        raise SnapshotError(f"{what}: the server's answer is not JSON: {msg.data[:200]!r}") from err
    error = body.get("error")
    if error:
        raise SnapshotError(f"{what}: {error.get('description', error)}")
    return body


def _files(folder: Path, stream: str) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stream}.json", folder / f"{stream}.snapshot"


def _write_head(path: Path, head: dict[str, Any]) -> None:
    path.write_text(json.dumps(head, indent=2))


def _read_head(path: Path) -> dict[str, Any]:
    head: dict[str, Any] = json.loads(path.read_text())
    return head


async def snapshot_stream(nc: Client, stream: str, folder: Path) -> dict[str, Any]:
    """Write ``stream``'s snapshot (with its consumers) into ``folder``; returns its state."""
    head_file, data_file = _files(folder, stream)
    inbox = nc.new_inbox()
    chunks: asyncio.Queue[Msg] = asyncio.Queue()

    async def on_chunk(msg: Msg) -> None:
        await chunks.put(msg)

    sub = await nc.subscribe(inbox, cb=on_chunk)
    try:
        request = {"deliver_subject": inbox, "chunk_size": CHUNK_BYTES, "no_consumers": False}
        reply = await nc.request(
            f"$JS.API.STREAM.SNAPSHOT.{stream}", json.dumps(request).encode(), API_TIMEOUT_S
        )
        head = _answer(reply, f"snapshot of {stream}")
        size = 0
        with open(data_file, "wb") as out:  # noqa: ASYNC230 - a command, not a service
            while True:
                try:
                    msg = await asyncio.wait_for(chunks.get(), CHUNK_TIMEOUT_S)
                except TimeoutError:
                    raise SnapshotError(
                        f"snapshot of {stream}: no chunk for {CHUNK_TIMEOUT_S} s"
                    ) from None
                if not msg.data:
                    status = (msg.headers or {}).get("Status", "")
                    if status and status != "204":
                        description = (msg.headers or {}).get("Description", "")
                        raise SnapshotError(f"snapshot of {stream}: {status} {description}")
                    break
                out.write(msg.data)
                size += len(msg.data)
                if msg.reply:
                    await nc.publish(msg.reply, b"")
    finally:
        await sub.unsubscribe()
    head["bytes"] = size
    _write_head(head_file, head)
    state: dict[str, Any] = head.get("state", {})
    return state


async def restore_stream(nc: Client, stream: str, folder: Path) -> dict[str, Any]:
    """Create ``stream`` from its snapshot in ``folder`` (it must not exist); its new state."""
    head_file, data_file = _files(folder, stream)
    head = _read_head(head_file)
    request = {"config": head["config"], "state": head.get("state", {})}
    reply = await nc.request(
        f"$JS.API.STREAM.RESTORE.{stream}", json.dumps(request).encode(), API_TIMEOUT_S
    )
    deliver = _answer(reply, f"restore of {stream}")["deliver_subject"]
    with open(data_file, "rb") as source:  # noqa: ASYNC230 - a command, not a service
        while chunk := source.read(CHUNK_BYTES):
            await nc.request(deliver, chunk, API_TIMEOUT_S)
    # The end: the server unpacks the stream and answers with it (that may take a while).
    done = await nc.request(deliver, b"", API_TIMEOUT_S * 6)
    state: dict[str, Any] = _answer(done, f"restore of {stream}").get("state", {})
    return state
