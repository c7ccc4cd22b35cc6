"""Without a mosquitto binary the broker's tests skip, or fail when CI requires it."""

from __future__ import annotations

import pytest

from tests.support import mosquitto


def test_a_missing_binary_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mosquitto.shutil, "which", lambda _name: None)
    monkeypatch.setattr(mosquitto, "_PLACES", ())
    monkeypatch.delenv("MOWDECK_REQUIRE_MOSQUITTO", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install mosquitto"):
        mosquitto.mosquitto_binary()


def test_a_missing_binary_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mosquitto.shutil, "which", lambda _name: None)
    monkeypatch.setattr(mosquitto, "_PLACES", ())
    monkeypatch.setenv("MOWDECK_REQUIRE_MOSQUITTO", "1")
    with pytest.raises(pytest.fail.Exception, match="MOWDECK_REQUIRE_MOSQUITTO=1"):
        mosquitto.mosquitto_binary()
