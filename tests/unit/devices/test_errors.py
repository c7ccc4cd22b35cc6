"""The Automower error catalogue: a state's code as the vendor's words in de and en."""

from __future__ import annotations

import pytest

from mowdeck.devices.errors import error_text, known_codes


@pytest.mark.parametrize(
    ("code", "locale", "text"),
    [
        ("automower.1", "en", "Outside working area"),
        ("automower.1", "de", "Außerhalb des Arbeitsbereichs"),
        ("automower.1", "de-AT", "Außerhalb des Arbeitsbereichs"),
        (24, "en", "Cutting system blocked"),
        ("automower.121", "en", "High internal temperature"),
        ("automower.724", "de", "Kommunikationsplatine SW muss aktualisiert werden"),
        # No German text for 135: English rather than nothing.
        ("automower.135", "de", "Radar problem"),
        ("automower.0", "fr", "Unexpected error"),
    ],
    ids=[
        "en",
        "de",
        "de-region",
        "number",
        "spelling-mended",
        "de-724",
        "de-falls-back",
        "other-locale",
    ],
)
def test_a_known_code_reads_as_the_vendor_s_text(code: str | int, locale: str, text: str) -> None:
    assert error_text(code, locale) == text


@pytest.mark.parametrize(
    "code",
    ["automower.999", "automower.", "automower.x1", "blade_jammed", "openmower.1", "24", 999],
    ids=[
        "unknown",
        "empty",
        "not-a-number",
        "mowdeck-code",
        "other-protocol",
        "unprefixed",
        "int-unknown",
    ],
)
def test_anything_else_has_no_text(code: str | int) -> None:
    assert error_text(code, "en") is None


def test_the_catalogue_holds_every_numbered_code_with_a_text() -> None:
    codes = known_codes()
    assert len(codes) == 161
    assert set(range(128)) <= codes
    assert {701, 717, 724} <= codes
    assert all(error_text(c, "en") for c in codes)
    assert sum(error_text(c, "de") != error_text(c, "en") for c in codes) >= 140
