"""Readable texts of the vendors' numbered error codes (``data/automower_errors.json``).

A ``MowerState.error_code`` of a vendor adapter keeps the vendor's number under its
protocol's prefix (``automower.24``); ``error_text`` turns it into the vendor's words in
the user's language, for Notifications' messages and alarms and for the console. Pure: no
I/O beyond the package's own data, read once.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from types import MappingProxyType

import msgspec

__all__ = ["AUTOMOWER_PREFIX", "catalogue_json", "error_text", "known_codes"]

AUTOMOWER_PREFIX = "automower."


class _Texts(msgspec.Struct, frozen=True):
    en: str
    de: str | None = None


class _File(msgspec.Struct, frozen=True):
    source: str
    codes: dict[str, _Texts]


def catalogue_json() -> bytes:
    """The Automower catalogue as shipped: ``{"source": ..., "codes": {"<n>": {"en", "de"?}}}``
    (the console reads it to show an alarm's text in the user's language)."""
    return resources.files("mowdeck.devices").joinpath("data/automower_errors.json").read_bytes()


@cache
def _automower() -> MappingProxyType[int, _Texts]:
    found = msgspec.json.decode(catalogue_json(), type=_File)
    return MappingProxyType({int(code): texts for code, texts in found.codes.items()})


def _number(code: str | int) -> int | None:
    if isinstance(code, int):
        return code
    digits = code.removeprefix(AUTOMOWER_PREFIX)
    if digits == code or not digits.isdigit():
        return None
    return int(digits)


def error_text(code: str | int, locale: str) -> str | None:
    """The vendor's text for ``code`` in ``locale`` (``de`` or ``en``), else None.

    ``code`` is a state's ``error_code`` (``"automower.24"``) or the Automower number
    itself. A code with no German text answers in English; an unknown code, a code of
    another protocol or Mowdeck's own codes answer None (show the code as it is).
    """
    number = _number(code)
    if number is None:
        return None
    texts = _automower().get(number)
    if texts is None:
        return None
    if locale.lower().startswith("de") and texts.de:
        return texts.de
    return texts.en


def known_codes() -> frozenset[int]:
    """Every Automower error number the catalogue has a text for."""
    return frozenset(_automower())
