"""Templates: both locale files agree, every message renders, numbers and times per locale."""

from __future__ import annotations

from typing import Any

import pytest

from mowdeck.notifications.alarms.escalation import ESCALATED
from mowdeck.notifications.errors import TemplateError
from mowdeck.notifications.rules.evaluate import MESSAGE_KEYS
from mowdeck.notifications.rules.events import Param
from mowdeck.notifications.rules.templates import (
    LOCALES,
    MOWER_PARAM,
    SUMMARY_KEY,
    Catalogue,
    Formats,
    LocaleMessages,
    Message,
    Plural,
    default_catalogue,
    placeholders,
    render,
)
from tests.unit.notifications.rules.test_evaluate import CASES
from tests.unit.notifications.samples import run

CATALOGUE = default_catalogue()
EN, DE = (CATALOGUE.messages(locale) for locale in ("en", "de"))
# A value of every parameter type, as the rules write them.
SAMPLE: dict[str, Param] = {
    "text": "Robo",
    "count": 3,
    "number": 0.5,
    "percent": 18,
    "duration": 3900,
    "time": "2026-07-15T12:05:00+00:00",
    "error": "automower.9",
}


def test_both_locales_have_the_same_message_keys() -> None:
    assert set(CATALOGUE.locales) == set(LOCALES)
    assert set(EN.messages) == set(DE.messages)
    assert set(EN.messages) == MESSAGE_KEYS | {SUMMARY_KEY, ESCALATED}


@pytest.mark.parametrize("key", sorted(EN.messages))
def test_both_locales_declare_the_same_parameters(key: str) -> None:
    en, de = EN.messages[key], DE.messages[key]
    assert en.params == de.params
    assert isinstance(en.title, Plural) == isinstance(de.title, Plural)
    assert isinstance(en.body, Plural) == isinstance(de.body, Plural)


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("key", sorted(EN.messages))
def test_placeholders_are_exactly_the_declared_parameters(locale: str, key: str) -> None:
    message = CATALOGUE.messages(locale).messages[key]
    used = placeholders(message.title) | placeholders(message.body)
    assert used == set(message.params)


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("key", sorted(EN.messages))
def test_every_message_renders_with_its_declared_parameters(locale: str, key: str) -> None:
    message = CATALOGUE.messages(locale).messages[key]
    params = {name: SAMPLE[kind] for name, kind in message.params.items()}
    title, body = render(key, params, locale, "Europe/Berlin")
    for text in (title, body):
        assert text.strip()
        assert "{" not in text
        assert "}" not in text
    if MOWER_PARAM in message.params:
        assert "Robo" in title


@pytest.mark.parametrize("locale", LOCALES)
def test_every_event_of_the_rules_renders(locale: str) -> None:
    for _, steps, _ in CASES:
        for event in run(steps).events:
            assert event.kind in event.message_key
            render(event.message_key, {**event.params, MOWER_PARAM: "Robo"}, locale, "UTC")


RENDERED = [
    ("battery_low", {"battery": 18}, "en", "UTC", ("Robo: battery low", "Battery at 18%.")),
    ("battery_low", {"battery": 18}, "de", "UTC", ("Robo: Akku schwach", "Akku bei 18 %.")),
    (
        "mowing_finished",
        {"duration_seconds": 3930, "started_at": "2026-07-15T10:00:00+00:00"},
        "en",
        "UTC",
        ("Robo: mowing finished", "Finished mowing after 1 h 5 min."),
    ),
    (
        "mowing_finished",
        {"duration_seconds": 3600},
        "de",
        "UTC",
        ("Robo: Mähen beendet", "Nach 1 h fertig gemäht."),
    ),
    (
        "mower_stuck.standstill",
        {"stuck_seconds": 300},
        "en",
        "UTC",
        ("Robo is stuck", "Has not moved for 5 min while mowing."),
    ),
    (
        "mower_online",
        {"offline_seconds": 45},
        "de",
        "UTC",
        ("Robo ist wieder online", "Nach 45 s wieder erreichbar."),
    ),
    (
        "mower_offline.silence",
        {"since": "2026-07-15T12:05:00+00:00"},
        "de",
        "Europe/Berlin",
        ("Robo ist offline", "Seit 14:05 Uhr keine Meldung vom Mäher."),
    ),
    (
        "mower_offline.link",
        {"since": "2026-07-15T12:05:00+00:00"},
        "en",
        "America/New_York",
        ("Robo is offline", "The connection was lost at 08:05."),
    ),
    (
        "mower_offline.state",
        {"since": "2026-01-15T12:05:00+00:00"},
        "en",
        "Europe/Berlin",
        ("Robo is offline", "The mower reports being offline since 13:05."),
    ),
    (
        "mower_stuck.error",
        {"error_code": "blade_blocked"},
        "en",
        "UTC",
        ("Robo needs help", "Stopped with error blade_blocked."),
    ),
    (
        "mower_stuck.error",
        {"error_code": "automower.24"},
        "en",
        "UTC",
        ("Robo needs help", "Stopped with error automower.24 (Cutting system blocked)."),
    ),
    (
        "mower_stuck.error",
        {"error_code": "automower.71"},
        "de",
        "UTC",
        ("Robo braucht Hilfe", "Mit dem Fehler automower.71 (Alarm! Mäher angehoben) angehalten."),
    ),
    (
        "mower_stuck.error",
        {"error_code": "automower.9999"},
        "en",
        "UTC",
        ("Robo needs help", "Stopped with error automower.9999."),
    ),
    (
        SUMMARY_KEY,
        {"count": 1},
        "en",
        "UTC",
        ("1 notification while quiet", "Open the app to read it."),
    ),
    (
        SUMMARY_KEY,
        {"count": 3},
        "en",
        "UTC",
        ("3 notifications while quiet", "Open the app to read them."),
    ),
    (
        SUMMARY_KEY,
        {"count": 1},
        "de",
        "UTC",
        ("1 Benachrichtigung während der Ruhezeit", "Öffne die App, um sie zu lesen."),
    ),
    (
        SUMMARY_KEY,
        {"count": 1234},
        "de",
        "UTC",
        ("1.234 Benachrichtigungen während der Ruhezeit", "Öffne die App, um sie zu lesen."),
    ),
    (
        SUMMARY_KEY,
        {"count": 1234},
        "en",
        "UTC",
        ("1,234 notifications while quiet", "Open the app to read them."),
    ),
]


@pytest.mark.parametrize(
    ("key", "params", "locale", "zone", "expected"),
    RENDERED,
    ids=[
        "battery-en",
        "battery-de",
        "duration-hours-and-minutes",
        "duration-whole-hour",
        "duration-minutes",
        "duration-seconds",
        "time-in-berlin-summer",
        "time-in-new-york",
        "time-in-berlin-winter",
        "error-code-as-is",
        "automower-error-with-its-text-en",
        "automower-error-with-its-text-de",
        "unknown-automower-error-as-is",
        "summary-one-en",
        "summary-other-en",
        "summary-one-de",
        "summary-grouped-de",
        "summary-grouped-en",
    ],
)
def test_rendered(
    key: str, params: dict[str, Param], locale: str, zone: str, expected: tuple[str, str]
) -> None:
    assert render(key, {MOWER_PARAM: "Robo", **params}, locale, zone) == expected


# -- what refuses to render ------------------------------------------------------------


def _catalogue(title: str, body: str, **params: Any) -> Catalogue:
    formats = Formats(decimal=",", group=".", percent="{n} %", hour="h", minute="min", second="s")
    message = Message(params=params, title=title, body=body)
    return Catalogue({"xx": LocaleMessages(locale="xx", formats=formats, messages={"m": message})})


def test_a_number_is_written_with_the_locales_decimal_mark() -> None:
    catalogue = _catalogue("{d} m", "{n}", d="number", n="count")
    assert catalogue.render("m", {"d": 1234.56, "n": 7}, "xx", "UTC") == ("1.234,6 m", "7")


REFUSED = [
    ("nope", {"battery": 18}, "en", "no message 'nope'"),
    ("battery_low", {"battery": 18}, "fr", "no messages for locale 'fr'"),
    ("battery_low", {"battery": 18, "other": 1}, "en", "needs the parameter 'mower'"),
    ("battery_low", {"battery": "high", MOWER_PARAM: "R"}, "en", "'battery' is no percent"),
    (
        "mower_offline.link",
        {"since": "2026-07-15T12:05:00", MOWER_PARAM: "R"},
        "en",
        "'since' is no time",
    ),
    ("mower_offline.link", {"since": "yesterday", MOWER_PARAM: "R"}, "en", "'since' is no time"),
]


@pytest.mark.parametrize(
    ("key", "params", "locale", "message"),
    REFUSED,
    ids=[
        "unknown-key",
        "unknown-locale",
        "missing-parameter",
        "not-a-percent",
        "time-without-offset",
        "not-a-time",
    ],
)
def test_refused(key: str, params: dict[str, Param], locale: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(key, params, locale, "UTC")


def test_an_undeclared_placeholder_refuses_to_render() -> None:
    with pytest.raises(TemplateError, match="undeclared parameter 'b'"):
        _catalogue("{a}", "{b}", a="text").render("m", {"a": "x", "b": "y"}, "xx", "UTC")


@pytest.mark.parametrize("text", ["{a.b}", "{a[0]}", "{a!r}", "{a:>3}", "{}"])
def test_a_placeholder_must_be_a_plain_name(text: str) -> None:
    with pytest.raises(TemplateError):
        placeholders(text)
