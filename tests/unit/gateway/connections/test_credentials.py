"""Credentials read from MOWDECK_GATEWAY_CREDENTIALS_DIR, and why one cannot be used."""

from __future__ import annotations

from pathlib import Path

import pytest

from mowdeck.gateway.connections.credentials import CredentialError, Credentials, MqttLogin


def test_a_named_login_is_read(tmp_path: Path) -> None:
    (tmp_path / "yard.json").write_text('{"username": "mower", "password": "pw"}')
    assert Credentials(tmp_path).read("yard", MqttLogin) == MqttLogin("mower", "pw")


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("yard", None, "yard.json does not exist"),
        ("yard", "{not json", "is not valid"),
        ("yard", '{"password": "pw"}', "missing required field `username`"),
        ("../yard", None, "is not a well-formed name"),
    ],
    ids=["missing", "malformed", "incomplete", "path"],
)
def test_an_unusable_credential_says_why(
    tmp_path: Path, name: str, content: str | None, reason: str
) -> None:
    if content is not None:
        (tmp_path / "yard.json").write_text(content)
    with pytest.raises(CredentialError, match=reason):
        Credentials(tmp_path).read(name, MqttLogin)


def test_the_secret_is_never_in_the_reason(tmp_path: Path) -> None:
    (tmp_path / "yard.json").write_text('{"username": "mower", "password": 12345678}')
    with pytest.raises(CredentialError) as caught:
        Credentials(tmp_path).read("yard", MqttLogin)
    assert "12345678" not in str(caught.value)


def test_without_a_directory_the_setting_is_named() -> None:
    with pytest.raises(CredentialError, match="MOWDECK_GATEWAY_CREDENTIALS_DIR is not set"):
        Credentials.at(None).read("yard", MqttLogin)
