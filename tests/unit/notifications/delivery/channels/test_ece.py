"""aes128gcm push encryption: what a browser decrypts, fresh keys per message, bad keys."""

from __future__ import annotations

import base64
import os

import http_ece
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mowdeck.notifications.delivery.channels.ece import (
    HEADER_BYTES,
    RECORD_SIZE,
    encrypt_push,
    subscription_keys,
)
from mowdeck.notifications.delivery.channels.webpush import MAX_PLAINTEXT


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def browser() -> tuple[ec.EllipticCurvePrivateKey, bytes, str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    auth = os.urandom(16)
    public = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return key, auth, b64url(public), b64url(auth)


def test_a_browser_decrypts_what_is_encrypted() -> None:
    key, auth, p256dh, auth_text = browser()
    plain = b'{"title": "M\xc3\xa4her 3: Akku schwach"}'
    body = encrypt_push(subscription_keys(p256dh, auth_text), plain)
    assert int.from_bytes(body[16:20]) == RECORD_SIZE
    assert body[20] == 65
    assert len(body) == HEADER_BYTES + len(plain) + 1 + 16
    decrypted = http_ece.decrypt(body, private_key=key, auth_secret=auth, version="aes128gcm")
    assert decrypted == plain


def test_every_message_has_its_own_key_pair_and_salt() -> None:
    _, _, p256dh, auth_text = browser()
    keys = subscription_keys(p256dh, auth_text)
    bodies = [encrypt_push(keys, b"same text") for _ in range(20)]
    assert len({b[:16] for b in bodies}) == 20  # salts
    assert len({b[21:HEADER_BYTES] for b in bodies}) == 20  # the sender's public keys


def test_another_subscription_cannot_decrypt() -> None:
    _, _, p256dh, auth_text = browser()
    other, other_auth, _, _ = browser()
    body = encrypt_push(subscription_keys(p256dh, auth_text), b"secret")
    with pytest.raises(Exception):  # noqa: B017, PT011 - http_ece raises InvalidTag
        http_ece.decrypt(body, private_key=other, auth_secret=other_auth, version="aes128gcm")


@pytest.mark.parametrize(
    ("p256dh", "auth", "reason"),
    [
        (b64url(b"\x04" + b"\x01" * 64), b64url(b"a" * 16), "subscription keys are not valid"),
        (None, b64url(b"a" * 15), "auth secret is 15 bytes, not 16"),
        (None, "!!!", "subscription keys are not valid"),
    ],
)
def test_keys_that_are_not_valid_are_refused(p256dh: str | None, auth: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        subscription_keys(p256dh or browser()[2], auth)


def test_a_payload_larger_than_one_record_is_refused() -> None:
    _, _, p256dh, auth_text = browser()
    keys = subscription_keys(p256dh, auth_text)
    assert len(encrypt_push(keys, b"x" * MAX_PLAINTEXT)) == RECORD_SIZE
    with pytest.raises(ValueError, match="do not fit one record"):
        encrypt_push(keys, b"x" * (RECORD_SIZE - 16))
