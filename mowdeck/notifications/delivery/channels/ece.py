"""Web Push message encryption: ``aes128gcm`` (RFC 8188) keyed as RFC 8291 says.

Done with ``cryptography`` directly: a subscription's public key and auth secret are
decoded once (``subscription_keys``; the webpush channel keeps what it decoded, a bounded
number, for as long as it runs), and the key schedule is five HMAC-SHA-256 calls instead
of HKDF objects. What RFC 8291 asks of the sender is kept: a new ECDH key
pair and a new random salt for every message (section 2; the key pair is discarded after
encrypting), one record, the ``0x02`` delimiter of the last record, no padding.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "HEADER_BYTES",
    "RECORD_SIZE",
    "SubscriptionKeys",
    "encrypt_push",
    "subscription_keys",
]

RECORD_SIZE = 4096
# salt (16) + rs (4) + idlen (1) + the sender's uncompressed P-256 point (65).
HEADER_BYTES = 86
_CURVE = ec.SECP256R1()
_CEK_INFO = b"Content-Encoding: aes128gcm\x00\x01"
_NONCE_INFO = b"Content-Encoding: nonce\x00\x01"
_RS_IDLEN = struct.pack("!IB", RECORD_SIZE, 65)


class SubscriptionKeys:
    """A subscription's ``p256dh`` and ``auth``, decoded and checked once."""

    __slots__ = ("auth", "key_info", "public_key")

    def __init__(self, p256dh: bytes, auth: bytes) -> None:
        if len(auth) != 16:
            raise ValueError(f"auth secret is {len(auth)} bytes, not 16")
        # Raises ValueError for anything that is not a point on P-256.
        self.public_key = ec.EllipticCurvePublicKey.from_encoded_point(_CURVE, p256dh)
        self.auth = auth
        # RFC 8291 section 3.4: "WebPush: info" 0x00 ua_public as_public.
        self.key_info = b"WebPush: info\x00" + p256dh


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def subscription_keys(p256dh: str, auth: str) -> SubscriptionKeys:
    """The decoded keys of a subscription; ValueError if they are not valid."""
    try:
        return SubscriptionKeys(_unb64url(p256dh), _unb64url(auth))
    except (ValueError, TypeError) as err:
        raise ValueError(f"subscription keys are not valid: {err}") from None


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.digest(key, data, hashlib.sha256)


def encrypt_push(keys: SubscriptionKeys, plaintext: bytes) -> bytes:
    """One ``aes128gcm`` body for ``plaintext`` (at most one record of 4096 bytes)."""
    if len(plaintext) + 17 > RECORD_SIZE:
        raise ValueError(f"{len(plaintext)} bytes do not fit one record")
    # A fresh key pair and salt per message: RFC 8291 section 2.
    sender = ec.generate_private_key(_CURVE)
    as_public = sender.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    ecdh_secret = sender.exchange(ec.ECDH(), keys.public_key)
    # HKDF with a 32-byte output is one HMAC for extract and one for expand (RFC 5869).
    prk_key = _hmac(keys.auth, ecdh_secret)
    ikm = _hmac(prk_key, keys.key_info + as_public + b"\x01")
    salt = os.urandom(16)
    prk = _hmac(salt, ikm)
    cek = _hmac(prk, _CEK_INFO)[:16]
    nonce = _hmac(prk, _NONCE_INFO)[:12]
    # The single record is the last one: delimiter 0x02, no padding (RFC 8188 section 2).
    ciphertext = AESGCM(cek).encrypt(nonce, plaintext + b"\x02", None)
    return salt + _RS_IDLEN + as_public + ciphertext
