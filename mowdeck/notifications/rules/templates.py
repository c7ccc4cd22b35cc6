"""Messages rendered per recipient from data templates (``messages/<locale>.json``).

Each locale file holds its number formats and, per message key, the parameters the
message takes with their type, a title and a body with ``{param}`` placeholders. A title
or body may be ``{"one": ..., "other": ...}``, chosen by the ``count`` parameter. The
types say how a value is written for the locale and the user's time zone:

========  ======================  ===================  ====================
type      value                   en                   de
========  ======================  ===================  ====================
text      any                     as is                as is
count     an integer              1,234                1.234
number    a number                0.5                  0,5
percent   an integer              18%                  18 %
duration  whole seconds           1 h 5 min            1 h 5 min
time      ISO 8601 instant        14:05 (user's zone)  14:05 (user's zone)
error     a state's error code    automower.24         automower.24
                                  (Cutting system      (Schneidsystem
                                  blocked)             blockiert)
========  ======================  ===================  ====================

An ``error`` is the code as the mower reported it, followed by the vendor's words for it
where ``mowdeck.devices.errors.error_text`` knows the code (Automower's numbered codes);
any other code is written as it is.

Every rule message takes ``mower``, the mower's name, which the fan-out adds to the
event's parameters. A missing message key, locale or parameter raises
``TemplateError``: a notification is never sent blank or with a placeholder showing.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Literal

import msgspec

from mowdeck.devices.errors import error_text
from mowdeck.notifications.errors import TemplateError
from mowdeck.notifications.rules.events import Param
from mowdeck.notifications.rules.quiet import zone

__all__ = [
    "LOCALES",
    "MOWER_PARAM",
    "SUMMARY_KEY",
    "Catalogue",
    "Formats",
    "Locale",
    "LocaleMessages",
    "Message",
    "Plural",
    "default_catalogue",
    "placeholders",
    "render",
]

Locale = Literal["en", "de"]
"""A language the shipped catalogue has (``messages/<locale>.json``)."""
LOCALES: tuple[Locale, ...] = Locale.__args__  # type: ignore[attr-defined]
ParamType = Literal["text", "count", "number", "percent", "duration", "time", "error"]
MOWER_PARAM = "mower"
SUMMARY_KEY = "quiet_summary"
"""The message summing up what arrived during quiet hours; takes ``count``."""


class Formats(msgspec.Struct, frozen=True, kw_only=True):
    """How a locale writes numbers and durations."""

    decimal: str
    group: str
    percent: str
    hour: str
    minute: str
    second: str


class Plural(msgspec.Struct, frozen=True, kw_only=True):
    """A text by the ``count`` parameter: ``one`` for 1, ``other`` for the rest."""

    one: str
    other: str


Text = str | Plural


class Message(msgspec.Struct, frozen=True, kw_only=True):
    """One message key of one locale."""

    params: dict[str, ParamType]
    title: Text
    body: Text


class LocaleMessages(msgspec.Struct, frozen=True, kw_only=True):
    """The contents of one ``messages/<locale>.json``."""

    locale: str
    formats: Formats
    messages: dict[str, Message]


def placeholders(text: Text) -> set[str]:
    """The parameter names a text (every form of a plural) puts in."""
    forms = [text.one, text.other] if isinstance(text, Plural) else [text]
    names: set[str] = set()
    for form in forms:
        for _, name, spec, conversion in string.Formatter().parse(form):
            if name is None:
                continue
            if not name.isidentifier() or spec or conversion:
                raise TemplateError(f"placeholder {{{name}}} must be a plain parameter name")
            names.add(name)
    return names


def _number(value: float, decimals: int, formats: Formats) -> str:
    text = f"{value:,.{decimals}f}"
    return text.replace(",", "\0").replace(".", formats.decimal).replace("\0", formats.group)


def _duration(seconds: int, formats: Formats) -> str:
    hours, rest = divmod(max(0, seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} {formats.hour}" + (f" {minutes} {formats.minute}" if minutes else "")
    if minutes:
        return f"{minutes} {formats.minute}"
    return f"{secs} {formats.second}"


def _format(kind: ParamType, value: Param, formats: Formats, reader: tuple[str, str]) -> str:  # noqa: PLR0911 - one answer per type, read as a table
    locale, timezone = reader
    match kind:
        case "text":
            return str(value)
        case "count":
            return _number(int(value), 0, formats)
        case "number":
            return _number(float(value), 1, formats)
        case "percent":
            return formats.percent.format(n=_number(int(value), 0, formats))
        case "duration":
            return _duration(int(value), formats)
        case "time":
            instant = datetime.fromisoformat(str(value))
            if instant.tzinfo is None:
                raise ValueError("a time parameter must carry its offset")
            return instant.astimezone(zone(timezone)).strftime("%H:%M")
        case "error":
            text = error_text(str(value), locale)
            return f"{value} ({text})" if text else str(value)


def _choose(text: Text, params: Mapping[str, Param]) -> str:
    if isinstance(text, str):
        return text
    return text.one if params.get("count") == 1 else text.other


class Catalogue:
    """Every locale's messages; renders a message key for a recipient."""

    def __init__(self, locales: Mapping[str, LocaleMessages]) -> None:
        self._locales = dict(locales)

    @classmethod
    def load(cls) -> Catalogue:
        """The catalogue shipped in ``mowdeck/notifications/messages``."""
        folder = resources.files("mowdeck.notifications.rules").joinpath("messages")
        decoder = msgspec.json.Decoder(LocaleMessages)
        locales: dict[str, LocaleMessages] = {}
        for locale in LOCALES:
            data = folder.joinpath(f"{locale}.json").read_bytes()
            try:
                locales[locale] = decoder.decode(data)
            except msgspec.DecodeError as err:
                raise TemplateError(f"messages/{locale}.json: {err}") from err
        return cls(locales)

    @property
    def locales(self) -> list[str]:
        """The locales the catalogue holds."""
        return list(self._locales)

    def messages(self, locale: str) -> LocaleMessages:
        """One locale's messages."""
        try:
            return self._locales[locale]
        except KeyError:
            raise TemplateError(f"no messages for locale {locale!r}") from None

    def render(
        self, message_key: str, params: Mapping[str, Param], locale: str, timezone: str
    ) -> tuple[str, str]:
        """The title and body of ``message_key`` for a reader of ``locale`` in ``timezone``."""
        catalogue = self.messages(locale)
        message = catalogue.messages.get(message_key)
        if message is None:
            raise TemplateError(f"no message {message_key!r} in locale {locale!r}")
        formatted: dict[str, str] = {}
        for name, kind in message.params.items():
            if name not in params:
                raise TemplateError(f"message {message_key!r} needs the parameter {name!r}")
            try:
                formatted[name] = _format(kind, params[name], catalogue.formats, (locale, timezone))
            except (TypeError, ValueError) as err:
                raise TemplateError(
                    f"message {message_key!r}: parameter {name!r} is no {kind}: {err}"
                ) from err
        try:
            title = _choose(message.title, params).format_map(formatted)
            body = _choose(message.body, params).format_map(formatted)
        except KeyError as err:
            raise TemplateError(
                f"message {message_key!r} in {locale!r} uses an undeclared parameter {err}"
            ) from err
        return title, body


@cache
def default_catalogue() -> Catalogue:
    """The shipped catalogue, loaded once."""
    return Catalogue.load()


def render(
    message_key: str, params: Mapping[str, Param], locale: str, timezone: str
) -> tuple[str, str]:
    """The title and body of ``message_key`` from the shipped catalogue."""
    return default_catalogue().render(message_key, params, locale, timezone)
