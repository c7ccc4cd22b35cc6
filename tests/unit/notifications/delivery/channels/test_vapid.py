"""VAPID keys from the settings, the development key file, and JWTs per audience."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import structlog
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02, b64urlencode

from mowdeck.notifications.delivery.channels.settings import ChannelSettings
from mowdeck.notifications.delivery.channels.vapid import (
    VapidKeyError,
    VapidSigner,
    application_server_key,
    load_vapid,
    validate_subject,
)
from tests.support.webpush_receiver import unb64url, verify_vapid
from tests.unit.notifications.samples import EpochClock


def new_vapid() -> Vapid02:
    vapid = Vapid02()
    vapid.generate_keys()
    return vapid


def raw_private(vapid: Vapid02) -> str:
    number = vapid.private_key.private_numbers().private_value
    return str(b64urlencode(number.to_bytes(32, "big")))


def der_private(vapid: Vapid02) -> str:
    der = vapid.private_key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return str(b64urlencode(der))


def test_the_application_server_key_is_an_uncompressed_point() -> None:
    key = unb64url(application_server_key(new_vapid()))
    assert len(key) == 65
    assert key[0] == 4


@pytest.mark.parametrize("encode", [raw_private, der_private], ids=["raw", "der"])
def test_a_private_key_setting_in_raw_or_der(encode: object) -> None:
    vapid = new_vapid()
    text = encode(vapid)  # type: ignore[operator]
    loaded = load_vapid(ChannelSettings(notifications_vapid_private_key=text))
    assert application_server_key(loaded) == application_server_key(vapid)


def test_pem_text_in_the_key_setting_is_refused_with_a_hint() -> None:
    pem = new_vapid().private_pem().decode()
    with pytest.raises(VapidKeyError, match="not PEM text"):
        load_vapid(ChannelSettings(notifications_vapid_private_key=pem))


def test_a_broken_key_setting_is_refused_without_showing_it() -> None:
    with pytest.raises(VapidKeyError) as info:
        load_vapid(ChannelSettings(notifications_vapid_private_key="c2VjcmV0LXZhbHVl"))
    assert "c2VjcmV0LXZhbHVl" not in str(info.value)


def test_a_pem_key_file(tmp_path: Path) -> None:
    vapid = new_vapid()
    path = tmp_path / "vapid.pem"
    path.write_bytes(vapid.private_pem())
    loaded = load_vapid(ChannelSettings(notifications_vapid_private_key_file=str(path)))
    assert application_server_key(loaded) == application_server_key(vapid)


def test_a_missing_key_file_is_an_error_not_a_new_key(tmp_path: Path) -> None:
    path = tmp_path / "absent.pem"
    with pytest.raises(VapidKeyError, match="cannot read"):
        load_vapid(ChannelSettings(notifications_vapid_private_key_file=str(path)))
    assert not path.exists()


def test_the_development_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "vapid.pem"
    settings = ChannelSettings(notifications_vapid_key_file=str(path))
    with structlog.testing.capture_logs() as logs:
        first = load_vapid(settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    created = [e for e in logs if e["event"] == "vapid_key_created"]
    assert created[0]["public_key"] == application_server_key(first)
    with structlog.testing.capture_logs() as logs:
        second = load_vapid(settings)
    assert application_server_key(second) == application_server_key(first)
    assert not [e for e in logs if e["event"] == "vapid_key_created"]


def test_no_key_configured_says_which_settings_exist() -> None:
    with pytest.raises(VapidKeyError, match="MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY"):
        load_vapid(ChannelSettings())


@pytest.mark.parametrize(
    "subject",
    ["mailto:ops@mowdeck.example", "https://mowdeck.example/contact"],
    ids=["mailto", "https"],
)
def test_valid_subjects(subject: str) -> None:
    assert validate_subject(subject) == subject


@pytest.mark.parametrize(
    "subject",
    [None, "", "ops@mowdeck.example", "mailto:nobody", "http://mowdeck.example", "https://"],
    ids=["none", "empty", "bare-address", "no-at", "http", "no-host"],
)
def test_invalid_subjects(subject: str | None) -> None:
    with pytest.raises(VapidKeyError, match="VAPID_SUBJECT"):
        validate_subject(subject)


def claims(header: str) -> dict[str, object]:
    token = header.split("t=")[1].split(",", maxsplit=1)[0]
    result: dict[str, object] = json.loads(unb64url(token.split(".")[1]))
    return result


def test_one_jwt_per_audience_reused_and_never_mixed() -> None:
    clock = EpochClock(1_800_000_000.0)
    signer = VapidSigner(new_vapid(), "mailto:ops@mowdeck.example", clock=clock)
    fcm = signer.authorization("https://fcm.googleapis.com")
    apple = signer.authorization("https://web.push.apple.com")
    assert signer.authorization("https://fcm.googleapis.com") == fcm
    assert signer.signatures == 2
    assert claims(fcm)["aud"] == "https://fcm.googleapis.com"
    assert claims(apple)["aud"] == "https://web.push.apple.com"
    assert claims(fcm)["exp"] == 1_800_000_000 + 12 * 3600
    assert claims(fcm)["sub"] == "mailto:ops@mowdeck.example"


def test_a_jwt_is_resigned_when_less_than_an_hour_is_left() -> None:
    clock = EpochClock(1_800_000_000.0)
    signer = VapidSigner(new_vapid(), "mailto:ops@mowdeck.example", clock=clock)
    first = signer.authorization("https://fcm.googleapis.com")
    clock.now += 11 * 3600 - 1
    assert signer.authorization("https://fcm.googleapis.com") == first
    clock.now += 2
    second = signer.authorization("https://fcm.googleapis.com")
    assert second != first
    assert claims(second)["exp"] == int(clock.now) + 12 * 3600
    assert signer.signatures == 2


def test_the_jwt_verifies_like_a_push_service_checks_it() -> None:
    clock = EpochClock(1_800_000_000.0)
    signer = VapidSigner(new_vapid(), "mailto:ops@mowdeck.example", clock=clock)
    header = signer.authorization("http://127.0.0.1:9")
    verified, _ = verify_vapid(header, "http://127.0.0.1:9", clock.now)
    assert verified["aud"] == "http://127.0.0.1:9"
    with pytest.raises(ValueError, match="aud"):
        verify_vapid(header, "http://127.0.0.1:10", clock.now)
    with pytest.raises(ValueError, match="exp"):
        verify_vapid(header, "http://127.0.0.1:9", clock.now + 13 * 3600)
