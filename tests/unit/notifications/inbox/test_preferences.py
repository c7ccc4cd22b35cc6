"""The preferences document: defaults, decoding, and problems that name their field."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from mowdeck.notifications.inbox.preferences import (
    Preferences,
    PreferencesError,
    Violation,
    decode_preferences,
    encode_preferences,
)
from mowdeck.notifications.rules.kinds import KINDS
from mowdeck.notifications.rules.quiet import QuietHours
from tests.unit.notifications.samples import MOWER, OTHER_MOWER


def test_a_user_who_never_saved_is_subscribed_to_nothing() -> None:
    prefs = Preferences()
    assert (prefs.scope, prefs.locale, prefs.timezone) == ("none", "en", "UTC")
    assert prefs.quiet_hours is None
    assert not prefs.covers(MOWER)


def test_missing_kinds_take_their_defaults() -> None:
    prefs = decode_preferences(b'{"kinds": {"battery_low": false, "job_started": true}}')
    assert prefs.enabled() == {
        "job_started": True,
        "mowing_finished": True,
        "mower_stuck": True,
        "battery_low": False,
        "mower_offline": True,
        "mower_online": True,
        "alarm_escalated": True,
        "left_area": True,
        "theft_suspected": True,
    }
    assert Preferences().enabled() == {kind: kind != "job_started" for kind in KINDS}


def test_a_full_document_round_trips() -> None:
    body = {
        "locale": "de",
        "timezone": "Europe/Berlin",
        "scope": "selected",
        "mowers": [str(MOWER), str(OTHER_MOWER)],
        "kinds": {"job_started": True},
        "quiet_hours": {"start": "22:00", "end": "07:00", "allow_critical": False},
    }
    prefs = decode_preferences(msgspec.json.encode(body))
    assert prefs.mowers == [MOWER, OTHER_MOWER]
    assert prefs.quiet_hours == QuietHours(start="22:00", end="07:00", allow_critical=False)
    assert decode_preferences(encode_preferences(prefs)) == prefs
    assert QuietHours(start="22:00", end="07:00").allow_critical


def test_repeated_mowers_are_kept_once_in_order() -> None:
    body = msgspec.json.encode({"mowers": [str(OTHER_MOWER), str(MOWER), str(OTHER_MOWER)]})
    assert decode_preferences(body).mowers == [OTHER_MOWER, MOWER]


@pytest.mark.parametrize(
    ("scope", "mowers", "covered"),
    [
        ("none", [MOWER], False),
        ("all", [], True),
        ("selected", [MOWER], True),
        ("selected", [OTHER_MOWER], False),
    ],
    ids=["none", "all", "selected-this", "selected-another"],
)
def test_scope_covers(scope: str, mowers: list[uuid.UUID], covered: bool) -> None:
    prefs = msgspec.convert({"scope": scope, "mowers": mowers}, Preferences)
    assert prefs.covers(MOWER) is covered


PROBLEMS = [
    ('{"locale": "fr"}', [("locale", "must be one of en, de")]),
    ('{"locale": 7}', [("locale", "must be one of en, de")]),
    ('{"scope": "some"}', [("scope", "must be one of none, all, selected")]),
    (
        '{"timezone": "Mars/Olympus_Mons"}',
        [("timezone", "unknown time zone; use an IANA name like Europe/Berlin")],
    ),
    (
        '{"timezone": "../../etc/passwd"}',
        [("timezone", "unknown time zone; use an IANA name like Europe/Berlin")],
    ),
    ('{"timezone": ""}', [("timezone", "Expected `str` of length >= 1")]),
    (
        '{"quiet_hours": {"start": "24:00", "end": "07:00"}}',
        [("quiet_hours.start", "must be a time HH:MM (00:00 to 23:59)")],
    ),
    (
        '{"quiet_hours": {"start": "22:00", "end": "7:00"}}',
        [("quiet_hours.end", "must be a time HH:MM (00:00 to 23:59)")],
    ),
    (
        '{"quiet_hours": {"start": "22:00"}}',
        [("quiet_hours", "Object missing required field `end`")],
    ),
    (
        '{"quiet_hours": {"start": "22:00", "end": "22:00"}}',
        [("quiet_hours.end", "must differ from start")],
    ),
    (
        '{"kinds": {"jobs_started": true}}',
        [("kinds.jobs_started", "unknown kind; one of " + ", ".join(KINDS))],
    ),
    ('{"kinds": {"job_started": "yes"}}', [("kinds", "Expected `bool`, got `str`")]),
    ('{"mowers": ["not-a-uuid"]}', [("mowers[0]", "Invalid UUID")]),
    ('{"scope": "all", "quiet_hour": null}', [("quiet_hour", "unknown field")]),
    (
        '{"quiet_hours": {"start": "22:00", "end": "07:00", "critical": true}}',
        [("quiet_hours.critical", "unknown field")],
    ),
    ("[]", [("", "Expected `object`, got `array`")]),
    (
        '{"timezone": "Nowhere", "kinds": {"x": true}}',
        [
            ("timezone", "unknown time zone; use an IANA name like Europe/Berlin"),
            ("kinds.x", "unknown kind; one of " + ", ".join(KINDS)),
        ],
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"),
    PROBLEMS,
    ids=[
        "unknown-locale",
        "locale-not-text",
        "unknown-scope",
        "unknown-time-zone",
        "time-zone-path",
        "empty-time-zone",
        "hour-24",
        "clock-without-leading-zero",
        "quiet-hours-without-end",
        "empty-quiet-hours",
        "unknown-kind",
        "kind-not-a-bool",
        "mower-not-a-uuid",
        "unknown-field",
        "unknown-quiet-hours-field",
        "not-an-object",
        "every-problem-at-once",
    ],
)
def test_problems_name_their_field(body: str, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(PreferencesError) as caught:
        decode_preferences(body)
    assert caught.value.violations == [Violation(*p) for p in expected]


def test_malformed_json_is_a_problem_of_the_body() -> None:
    with pytest.raises(PreferencesError) as caught:
        decode_preferences(b'{"scope": ')
    [problem] = caught.value.violations
    assert problem.field == ""
    assert problem.reason.startswith("not a JSON object")
    assert str(caught.value).startswith("body: ")
