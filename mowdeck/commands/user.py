"""``mowdeck user disable|delete --user ID``: tell the services a user is gone (development).

Identity owns users; this stands in for it by publishing ``identity.user.disabled`` or
``identity.user.deleted``. Notifications then deletes the user's preferences, targets,
inbox and deliveries.
"""

from __future__ import annotations

import argparse
import sys
import uuid

from contracts.v1 import UserRef
from mowdeck.commands.identity_events import EventNotPublishedError, publish_identity_event
from mowdeck.kit.settings import BaseSettings, load_settings

ACTIONS = {"disable": "identity.user.disabled", "delete": "identity.user.deleted"}


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck user``."""
    parser.add_argument("action", choices=sorted(ACTIONS), help="what happened to the user")
    parser.add_argument("--user", required=True, help="user id (a token's sub)")
    parser.add_argument("--account", type=uuid.UUID, default=None, help="the user's account")


async def run(args: argparse.Namespace) -> int:
    """Publish the event on ``MOWDECK_NATS_URL``; exit 3 when it could not be stored."""
    settings = load_settings(BaseSettings)
    event_type = ACTIONS[args.action]
    try:
        event = await publish_identity_event(
            settings.nats_url,
            event_type,
            UserRef(user_id=args.user, account_id=args.account),
            account_id=args.account,
        )
    except EventNotPublishedError as err:
        print(f"mowdeck user: {err}", file=sys.stderr)
        return 3
    print(f"published {event_type} for user {args.user} (event {event.id})")
    return 0
