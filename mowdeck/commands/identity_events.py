"""Publishing the ``identity.*`` events that the CLI tools stand in for Identity with.

Identity is not part of Mowdeck (its users come with the tokens), so in development the
tools that change who may do what say so on the bus, as Identity would: ``mowdeck grant``
publishes ``identity.grants.changed`` and ``mowdeck user`` publishes
``identity.user.disabled`` / ``.deleted``. Services drop cached decisions or a user's data
when they see them.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from contracts.v1 import EventEnvelope, GrantsChanged, Struct, UserRef
from mowdeck.errors import MowdeckError
from mowdeck.kit.bus import Bus, NatsCredentials
from mowdeck.kit.settings import BaseSettings, load_settings

__all__ = ["EventNotPublishedError", "publish_identity_event"]

PRODUCER = "mowdeck-cli"
CONNECT_TIMEOUT_SECONDS = 5.0


class EventNotPublishedError(MowdeckError):
    """The event could not be stored on the bus (NATS unreachable, no stream)."""


async def publish_identity_event(
    nats_url: str,
    event_type: str,
    payload: GrantsChanged | UserRef,
    *,
    account_id: uuid.UUID | None = None,
    credentials: NatsCredentials | None = None,
) -> EventEnvelope[Struct]:
    """Publish one ``identity.*`` event and wait until the EVENTS stream stored it.

    It connects as the bus user ``cli`` with ``credentials``, by default those of the
    environment (``MOWDECK_NATS_USER``/``_PASSWORD``/``_NKEY_SEED_FILE``).
    """
    if credentials is None:
        credentials = NatsCredentials.from_settings(load_settings(BaseSettings))
    event: EventEnvelope[Struct] = EventEnvelope.new(
        event_type, payload, producer=PRODUCER, now=datetime.now(UTC), account_id=account_id
    )
    try:
        # Bus.connect waits for NATS for ever (right for a service, wrong for a command).
        bus = await asyncio.wait_for(
            Bus.connect(nats_url, name=PRODUCER, credentials=credentials, user="cli"),
            timeout=CONNECT_TIMEOUT_SECONDS,
        )
    except (TimeoutError, MowdeckError) as err:
        raise EventNotPublishedError(f"cannot reach NATS at {nats_url}: {err!r}") from err
    try:
        await bus.publish_event(event)
    except Exception as err:
        raise EventNotPublishedError(f"{event_type} not stored: {err}") from err
    finally:
        await bus.drain()
    return event
