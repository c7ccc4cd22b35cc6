"""``mowdeck token`` mints what the services' verifier accepts."""

from __future__ import annotations

import uuid

import pytest

from mowdeck.authn import Principal, TokenVerifier, load_auth_settings
from mowdeck.cli import main
from tests.unit.authn.conftest import SECRET, Keys

ACCOUNT = uuid.UUID("0000000a-0000-4000-8000-00000000000a")


@pytest.mark.parametrize("kind", ["secret", "ed25519"], ids=["hs256", "eddsa"])
def test_token_command_prints_a_verifiable_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], keys: Keys, kind: str
) -> None:
    if kind == "secret":
        monkeypatch.setenv("MOWDECK_JWT_SECRET", SECRET)
    else:
        monkeypatch.setenv("MOWDECK_JWT_PRIVATE_KEY_FILE", str(keys.ed_private_file))
        monkeypatch.setenv("MOWDECK_JWT_KEY_FILE", str(keys.ed_public_file))
    assert main(["token", "--account", str(ACCOUNT), "--user", "olga", "--ttl", "90"]) == 0
    printed = capsys.readouterr().out.strip()
    assert TokenVerifier(load_auth_settings()).verify(printed) == Principal("olga", ACCOUNT)


def test_token_command_without_a_key_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("MOWDECK_JWT_SECRET", "MOWDECK_JWT_PRIVATE_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["token", "--account", str(ACCOUNT), "--user", "olga"]) == 2
    assert "no signing key" in capsys.readouterr().err


def test_token_command_refuses_an_empty_user(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOWDECK_JWT_SECRET", SECRET)
    with pytest.raises(SystemExit, match="mowdeck token: --user must not be empty"):
        main(["token", "--account", str(ACCOUNT), "--user", ""])
    assert capsys.readouterr().out == ""
