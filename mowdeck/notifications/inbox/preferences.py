"""A user's notification preferences: the document, its defaults and its validation.

```json
{"locale": "de", "timezone": "Europe/Berlin", "scope": "selected",
 "mowers": ["…uuid…"], "kinds": {"job_started": true, "battery_low": false},
 "quiet_hours": {"start": "22:00", "end": "07:00", "allow_critical": true}}
```

Every field is optional. A user who never saved anything has ``Preferences()``: scope
``none`` (nobody is notified until they subscribe, ADR 0022), locale ``en``, time zone
``UTC``. A kind missing from ``kinds`` takes its default (``kinds.DEFAULT_ENABLED``).

``decode_preferences`` turns a request body into ``Preferences`` or raises
``PreferencesError`` whose ``violations`` are ``(field, reason)`` pairs naming the field
(``quiet_hours.start``, ``mowers[2]``, ``kinds.jobs_started``): the HTTP layer answers
them as a 422. Whether each selected mower is in the account and viewable is the HTTP
layer's check (a 404), not this module's.
"""

from __future__ import annotations

import uuid
import zoneinfo
from typing import Annotated, Literal, NamedTuple

import msgspec

from mowdeck.notifications.errors import NotificationsError
from mowdeck.notifications.rules.kinds import DEFAULT_ENABLED, KINDS, Kind
from mowdeck.notifications.rules.quiet import QuietHours, zone
from mowdeck.notifications.rules.templates import LOCALES, Locale

__all__ = [
    "Preferences",
    "PreferencesError",
    "Scope",
    "Violation",
    "decode_preferences",
    "encode_preferences",
    "violations",
]

Scope = Literal["none", "all", "selected"]
_SCOPES: tuple[str, ...] = Scope.__args__  # type: ignore[attr-defined]
MAX_MOWERS = 10_000


class Preferences(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a user wants to hear about, in which language and time zone."""

    locale: Locale = "en"
    timezone: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = "UTC"
    scope: Scope = "none"
    mowers: Annotated[list[uuid.UUID], msgspec.Meta(max_length=MAX_MOWERS)] = msgspec.field(
        default_factory=list
    )
    kinds: dict[str, bool] = msgspec.field(default_factory=dict)
    quiet_hours: QuietHours | None = None

    def wants(self, kind: Kind) -> bool:
        """Whether the user enabled ``kind`` (or left it at its default, which is on)."""
        return self.kinds.get(kind, DEFAULT_ENABLED[kind])

    def enabled(self) -> dict[Kind, bool]:
        """Every kind with whether the user gets it: the choices over the defaults."""
        return {kind: self.wants(kind) for kind in KINDS}

    def covers(self, mower_id: uuid.UUID) -> bool:
        """Whether the user's scope includes ``mower_id``."""
        if self.scope == "all":
            return True
        return self.scope == "selected" and mower_id in self.mowers


class Violation(NamedTuple):
    """One thing wrong with a preferences document; an empty field is the body itself."""

    field: str
    reason: str


class PreferencesError(NotificationsError):
    """A preferences document that cannot be stored, with every violation found."""

    def __init__(self, found: list[Violation]) -> None:
        super().__init__("; ".join(f"{p.field or 'body'}: {p.reason}" for p in found))
        self.violations = found


_REASONS = {
    "locale": f"must be one of {', '.join(LOCALES)}",
    "scope": f"must be one of {', '.join(_SCOPES)}",
    "quiet_hours.start": "must be a time HH:MM (00:00 to 23:59)",
    "quiet_hours.end": "must be a time HH:MM (00:00 to 23:59)",
}


def _violation(err: msgspec.ValidationError) -> Violation:
    """msgspec's message as a field and a reason."""
    text, sep, path = str(err).rpartition(" - at `")
    if not sep:
        text, path = str(err), "$"
    field = path.rstrip("`").removeprefix("$").removeprefix(".")
    field = field.replace("[...]", "")
    if text.startswith("Object contains unknown field `"):
        name = text.removeprefix("Object contains unknown field `").rstrip("`")
        return Violation(f"{field}.{name}" if field else name, "unknown field")
    return Violation(field, _REASONS.get(field, text))


_decoder = msgspec.json.Decoder(Preferences)
_encoder = msgspec.json.Encoder()


def decode_preferences(body: bytes | str) -> Preferences:
    """The preferences in a JSON body; ``PreferencesError`` names what is wrong."""
    try:
        prefs = _decoder.decode(body)
    except msgspec.ValidationError as err:
        raise PreferencesError([_violation(err)]) from err
    except msgspec.DecodeError as err:
        raise PreferencesError([Violation("", f"not a JSON object ({err})")]) from err
    found = violations(prefs)
    if found:
        raise PreferencesError(found)
    if len(set(prefs.mowers)) != len(prefs.mowers):
        prefs = msgspec.structs.replace(prefs, mowers=list(dict.fromkeys(prefs.mowers)))
    return prefs


def encode_preferences(prefs: Preferences) -> bytes:
    """The preferences as JSON."""
    return _encoder.encode(prefs)


def _known_zone(name: str) -> bool:
    try:
        zone(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def violations(prefs: Preferences) -> list[Violation]:
    """What is wrong with decoded preferences beyond their types; empty when nothing."""
    found: list[Violation] = []
    if not _known_zone(prefs.timezone):
        found.append(
            Violation("timezone", "unknown time zone; use an IANA name like Europe/Berlin")
        )
    found.extend(
        Violation(f"kinds.{kind}", f"unknown kind; one of {', '.join(KINDS)}")
        for kind in prefs.kinds
        if kind not in KINDS
    )
    quiet = prefs.quiet_hours
    if quiet is not None and quiet.start == quiet.end:
        found.append(Violation("quiet_hours.end", "must differ from start"))
    return found
