"""Who may publish and subscribe what on the bus: one NATS user per service, as data.

``mowdeck nats-config`` writes these into the server configuration; docs/operations.md
shows the same table. Each user receives replies (publish acks, request replies,
push-consumer deliveries) on an inbox prefix of its own, ``_INBOX_<user>.>``
(``inbox_prefix``; the kit connects with it), so no service can read another's replies;
it may answer a request it received (``allow_responses``); everything else is listed
here. A service reading a stream gets the JetStream API of consumers on that stream only
(create, info, delete, next, acks, flow control), and ``$JS.API.STREAM.INFO`` of it: it
can bind its consumers and check that its streams exist (``streams``) but not change a
stream, which is the admin step's (``mowdeck streams``). Every HTTP service keeps the
shared deny-list (``mowdeck/authn/_denylist.py``): it watches its bucket, records
identity events from EVENTS and writes the bucket.
"""

from __future__ import annotations

import msgspec

from contracts.v1.subjects import (
    COMMAND_FILTER,
    COMMANDS,
    EMERGENCY_FILTER,
    EVENTS,
    FLEET_MOWERS_LIST,
    FLEET_SITES_AREAS,
    MOWER_EVENT_FILTER,
    RESULT_FILTER,
    SITE_EVENT_FILTER,
    STREAMS,
    TELEMETRY,
    TELEMETRY_FILTER,
)

__all__ = [
    "ADMIN",
    "DENYLIST_DELIVER",
    "DENYLIST_STREAM",
    "TICKETS_STREAM",
    "USERS",
    "BusUser",
    "inbox_prefix",
    "reader_of",
    "user",
]

# The deny-list's key-value bucket (AuthSettings.denylist_bucket) is this stream.
DENYLIST_BUCKET = "MOWDECK_DENYLIST"
DENYLIST_STREAM = f"KV_{DENYLIST_BUCKET}"
# The deny-list's recorder is one durable shared by every HTTP service, so by several bus
# users: its deliveries go to this subject, not to one user's inbox.
DENYLIST_DELIVER = "mowdeck.denylist.recorder"
# Realtime's stream tickets (RealtimeSettings.realtime_ticket_bucket).
TICKETS_BUCKET = "realtime-tickets"
TICKETS_STREAM = f"KV_{TICKETS_BUCKET}"


def inbox_prefix(name: str) -> str:
    """The inbox prefix of bus user ``name``: its replies and deliveries arrive under it."""
    return f"_INBOX_{name}"


def _inbox(name: str) -> str:
    return f"{inbox_prefix(name)}.>"


class BusUser(msgspec.Struct, frozen=True, kw_only=True):
    """A NATS user: the subjects it may publish to and subscribe to."""

    name: str
    purpose: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    # The streams the service needs: it is not ready while one is missing (kit/lifecycle.py).
    streams: tuple[str, ...] = ()


def reader_of(*streams: str) -> tuple[str, ...]:
    """The JetStream API subjects that consuming from ``streams`` takes."""
    subjects = ["$JS.API.INFO"]
    for s in streams:
        subjects += [
            f"$JS.API.STREAM.INFO.{s}",
            f"$JS.API.CONSUMER.CREATE.{s}.>",  # with a name and filter (server 2.9+)
            f"$JS.API.CONSUMER.CREATE.{s}",  # an ephemeral consumer (older clients)
            f"$JS.API.CONSUMER.DURABLE.CREATE.{s}.>",
            f"$JS.API.CONSUMER.INFO.{s}.>",
            f"$JS.API.CONSUMER.DELETE.{s}.>",
            f"$JS.API.CONSUMER.MSG.NEXT.{s}.>",
            f"$JS.ACK.{s}.>",
            f"$JS.FC.{s}.>",
        ]
    return tuple(subjects)


def _stream_info(*streams: str) -> tuple[str, ...]:
    # Publishing services check their streams exist when they start (require_streams).
    return ("$JS.API.INFO", *(f"$JS.API.STREAM.INFO.{s}" for s in streams))


# The deny-list of every HTTP service: watch the bucket, record identity events, write.
_DENYLIST = (
    f"$KV.{DENYLIST_BUCKET}.>",
    *reader_of(DENYLIST_STREAM, EVENTS.name),
)


USERS: tuple[BusUser, ...] = (
    BusUser(
        name="fleet",
        purpose="issues commands, announces mower and site changes and site roles, answers lists",
        publish=(
            COMMAND_FILTER,
            EMERGENCY_FILTER,
            MOWER_EVENT_FILTER,
            SITE_EVENT_FILTER,
            # Site roles granted through Fleet's API (PUT /v1/sites/{id}/members/{user}).
            "event.identity.grants.changed",
            *reader_of(COMMANDS.name),
            *_stream_info(EVENTS.name),
            *_DENYLIST,
        ),
        # Core subscriptions: results for waiting requests, other replicas' mower changes
        # and grant changes (cache invalidation).
        subscribe=(
            FLEET_MOWERS_LIST,
            FLEET_SITES_AREAS,
            RESULT_FILTER,
            MOWER_EVENT_FILTER,
            "event.identity.grants.changed",
            DENYLIST_DELIVER,
            _inbox("fleet"),
        ),
        streams=(COMMANDS.name, EVENTS.name, DENYLIST_STREAM),
    ),
    BusUser(
        name="gateway",
        purpose="executes commands, publishes results, telemetry and link events",
        publish=(
            RESULT_FILTER,
            TELEMETRY_FILTER,
            "event.mower.connected",
            "event.mower.disconnected",
            FLEET_MOWERS_LIST,
            *reader_of(COMMANDS.name, EVENTS.name),
            *_stream_info(TELEMETRY.name),
        ),
        # The emergency lane reads the stops' announcements (core subscription); commands
        # come through the durable consumer's deliver subject, an inbox.
        subscribe=(EMERGENCY_FILTER, _inbox("gateway")),
        streams=(COMMANDS.name, EVENTS.name, TELEMETRY.name),
    ),
    BusUser(
        name="telemetry",
        purpose="consumes states, results and mower events into read models",
        publish=(
            FLEET_MOWERS_LIST,
            *reader_of(TELEMETRY.name, COMMANDS.name, EVENTS.name),
            *_DENYLIST,
        ),
        subscribe=(DENYLIST_DELIVER, _inbox("telemetry")),
        streams=(TELEMETRY.name, COMMANDS.name, EVENTS.name, DENYLIST_STREAM),
    ),
    BusUser(
        name="notifications",
        purpose="consumes states and events, announces what it sent",
        publish=(
            "event.notifications.*",
            FLEET_MOWERS_LIST,
            FLEET_SITES_AREAS,
            *reader_of(TELEMETRY.name, EVENTS.name),
            *_DENYLIST,
        ),
        subscribe=(DENYLIST_DELIVER, _inbox("notifications")),
        streams=(TELEMETRY.name, EVENTS.name, DENYLIST_STREAM),
    ),
    BusUser(
        name="realtime",
        purpose="consumes states, results and events, asks Fleet for the mower list",
        publish=(
            # The accounts of the mowers (mowdeck/realtime/accounts.py).
            FLEET_MOWERS_LIST,
            *reader_of(TELEMETRY.name, COMMANDS.name, EVENTS.name),
            f"$JS.API.DIRECT.GET.{TELEMETRY.name}.>",
            f"$JS.API.DIRECT.GET.{TELEMETRY.name}",
            f"$JS.API.STREAM.MSG.GET.{TELEMETRY.name}",
            # Its stream tickets: a key-value bucket the admin step makes.
            f"$KV.{TICKETS_BUCKET}.>",
            f"$JS.API.STREAM.INFO.{TICKETS_STREAM}",
            f"$JS.API.DIRECT.GET.{TICKETS_STREAM}.>",
            f"$JS.API.DIRECT.GET.{TICKETS_STREAM}",
            f"$JS.API.STREAM.MSG.GET.{TICKETS_STREAM}",
            *_DENYLIST,
        ),
        subscribe=(DENYLIST_DELIVER, _inbox("realtime")),
        streams=(TELEMETRY.name, COMMANDS.name, EVENTS.name, DENYLIST_STREAM, TICKETS_STREAM),
    ),
    BusUser(
        name="cli",
        purpose="mowdeck grant and mowdeck user: identity events",
        publish=("event.identity.>", *_stream_info(EVENTS.name)),
        subscribe=(_inbox("cli"),),
        streams=(EVENTS.name,),
    ),
)

ADMIN = BusUser(
    name="admin",
    purpose="mowdeck streams: creates and updates the streams",
    publish=("$JS.API.>",),
    subscribe=(_inbox("admin"),),
    streams=tuple(s.name for s in STREAMS),
)


def user(name: str) -> BusUser:
    """The user named ``name`` (``admin`` included)."""
    for u in (*USERS, ADMIN):
        if u.name == name:
            return u
    raise KeyError(name)
