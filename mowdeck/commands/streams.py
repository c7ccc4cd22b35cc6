"""``mowdeck streams``: apply the stream definitions of the contracts (an admin step).

Run it with the admin's NATS credentials before the services start, as compose and the
demo do. A new stream gets ``MOWDECK_STREAM_REPLICAS``; an existing one keeps what an
operator configured and only gains what is missing (``kit/streams.py``). The deny-list's
key-value bucket (``MOWDECK_DENYLIST_BUCKET``) is made here too. Services never create
streams: they wait, not ready, until these exist (``Resources.require_streams``).
"""

from __future__ import annotations

import argparse
import asyncio

import nats.errors

from contracts.v1.subjects import STREAMS
from mowdeck.authn import AuthSettings, create_denylist_bucket, load_auth_settings
from mowdeck.errors import MowdeckError
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.settings import BaseSettings, load_settings
from mowdeck.kit.streams import Applied
from mowdeck.realtime.settings import RealtimeSettings, load_realtime_settings
from mowdeck.realtime.tickets import open_bucket

__all__ = ["StreamsNotAppliedError", "apply_all", "apply_streams", "configure", "run"]

CONNECT_TIMEOUT_SECONDS = 10.0


class StreamsNotAppliedError(MowdeckError):
    """NATS could not be reached or refused a stream definition."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck streams``."""
    parser.add_argument(
        "--replicas",
        type=_replicas,
        default=None,
        help="replicas of a stream created now (default: MOWDECK_STREAM_REPLICAS)",
    )


def _replicas(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 5:
        raise argparse.ArgumentTypeError("replicas must be 1 to 5")
    return value


async def apply_all(
    bus: Bus,
    *,
    replicas: int = 1,
    auth: AuthSettings | None = None,
    realtime: RealtimeSettings | None = None,
) -> list[Applied]:
    """The admin step on a connected ``bus``: the contracts' streams and two buckets.

    The buckets are the deny-list's (``auth``) and Realtime's stream tickets (``realtime``).
    """
    applied = await bus.ensure_streams(STREAMS, replicas=replicas)
    auth = auth or AuthSettings()
    action = await create_denylist_bucket(bus, auth)
    applied.append(Applied(stream=f"KV_{auth.denylist_bucket}", action=action))
    realtime = realtime or RealtimeSettings()
    found = await _exists(bus, f"KV_{realtime.realtime_ticket_bucket}")
    await open_bucket(bus.js, realtime.realtime_ticket_bucket, realtime.realtime_ticket_ttl_seconds)
    applied.append(
        Applied(
            stream=f"KV_{realtime.realtime_ticket_bucket}",
            action="unchanged" if found else "created",
        )
    )
    return applied


async def _exists(bus: Bus, stream: str) -> bool:
    return not await bus.missing_streams([stream])


async def apply_streams(
    settings: BaseSettings, *, replicas: int | None = None, auth: AuthSettings | None = None
) -> list[Applied]:
    """Create or merge every stream of the contracts on the configured NATS."""
    try:
        # Bus.connect waits for NATS for ever (right for a service, wrong for a command).
        bus = await asyncio.wait_for(
            Bus.connect(
                settings.nats_url,
                name="mowdeck-streams",
                credentials=NatsCredentials.from_settings(settings),
                user="admin",
            ),
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (TimeoutError, MowdeckError) as err:
        raise StreamsNotAppliedError(f"cannot reach NATS at {settings.nats_url}: {err!r}") from err
    try:
        return await apply_all(
            bus,
            replicas=settings.stream_replicas if replicas is None else replicas,
            auth=auth or load_auth_settings(),
            realtime=load_realtime_settings(),
        )
    except (MowdeckError, nats.errors.Error) as err:
        raise StreamsNotAppliedError(f"streams not applied: {err}") from err
    finally:
        await bus.drain()


async def run(args: argparse.Namespace) -> int:
    """Apply the streams and say, per stream, what was done and what was left alone."""
    settings = load_settings(BaseSettings)
    configure_logging(settings.log_level, settings.log_format)
    for applied in await apply_streams(settings, replicas=args.replicas):
        print(f"{applied.stream}: {applied.action}")
        for change in applied.changed:
            print(f"  changed: {change}")
        for kept in applied.kept:
            print(f"  left alone: {kept}")
    return 0
