"""VAPID (RFC 8292): the application server's key and JWTs signed once per push service.

A JWT names one audience (the push service origin) and is reused until shortly before it
expires; claims are a fresh dict per signature, never shared between audiences.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import structlog
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02, b64urlencode

from mowdeck.errors import MowdeckError
from mowdeck.notifications.delivery.channels.settings import ChannelSettings

__all__ = [
    "JWT_RESIGN_BEFORE_SECONDS",
    "JWT_VALIDITY_SECONDS",
    "VapidKeyError",
    "VapidSigner",
    "application_server_key",
    "load_vapid",
    "validate_subject",
]

JWT_VALIDITY_SECONDS = 12 * 3600
JWT_RESIGN_BEFORE_SECONDS = 3600
MAX_AUDIENCES = 1024
SUBJECT = re.compile(r"(mailto:[^@\s]+@[^@\s]+|https://[^\s/]+(/\S*)?)")

log = structlog.get_logger(__name__)


class VapidKeyError(MowdeckError):
    """The VAPID key or subject in the settings cannot be used."""


def validate_subject(subject: str | None) -> str:
    """The VAPID ``sub``: a ``mailto:`` address or an ``https:`` URL."""
    if not subject or not SUBJECT.fullmatch(subject):
        raise VapidKeyError(
            "MOWDECK_NOTIFICATIONS_VAPID_SUBJECT must be a mailto: address or an https: URL"
            f" (got {subject!r})"
        )
    return subject


def _from_text(text: str) -> Vapid02:
    if "-----BEGIN" in text:
        raise VapidKeyError(
            "MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY takes raw base64url or base64url DER,"
            " not PEM text (put a PEM key in MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY_FILE)"
        )
    try:
        return Vapid02.from_string(text.strip())
    except Exception as err:
        # py_vapid raises whatever the decoder raised; the key itself is never shown.
        raise VapidKeyError(
            f"MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY is not a P-256 key ({type(err).__name__})"
        ) from None


def _from_file(path: Path, variable: str) -> Vapid02:
    try:
        text = path.read_bytes()
    except OSError as err:
        raise VapidKeyError(f"{variable}: cannot read {path}: {err.strerror}") from err
    try:
        if b"-----BEGIN" in text:
            return Vapid02.from_pem(text)
        return Vapid02.from_der(text.strip())
    except Exception as err:
        raise VapidKeyError(
            f"{variable}: {path} holds no P-256 key ({type(err).__name__})"
        ) from None


def _create_key_file(path: Path) -> Vapid02:
    vapid = Vapid02()
    vapid.generate_keys()
    pem = vapid.private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL: two replicas starting at once must not overwrite each other's key.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(pem)
    return vapid


def load_vapid(settings: ChannelSettings) -> Vapid02:
    """The VAPID key: from the key setting, the key file, or the development key file."""
    if settings.notifications_vapid_private_key:
        return _from_text(settings.notifications_vapid_private_key)
    if settings.notifications_vapid_private_key_file:
        return _from_file(
            Path(settings.notifications_vapid_private_key_file),
            "MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY_FILE",
        )
    if settings.notifications_vapid_key_file:
        path = Path(settings.notifications_vapid_key_file)
        try:
            vapid = _create_key_file(path)
        except FileExistsError:
            return _from_file(path, "MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE")
        log.warning(
            "vapid_key_created",
            path=str(path),
            public_key=application_server_key(vapid),
            note="development only; production sets MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY",
        )
        return vapid
    raise VapidKeyError(
        "webpush needs a VAPID key: set MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY,"
        " MOWDECK_NOTIFICATIONS_VAPID_PRIVATE_KEY_FILE or (development)"
        " MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE"
    )


def application_server_key(vapid: Vapid02) -> str:
    """The public key browsers subscribe with: base64url of the uncompressed P-256 point."""
    raw = vapid.public_key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return str(b64urlencode(raw))


class VapidSigner:
    """``Authorization`` headers per audience, re-signed when less than an hour is left."""

    def __init__(
        self,
        vapid: Vapid02,
        subject: str,
        *,
        clock: Callable[[], float] = time.time,
        validity: float = JWT_VALIDITY_SECONDS,
        resign_before: float = JWT_RESIGN_BEFORE_SECONDS,
    ) -> None:
        self._vapid = vapid
        self._subject = validate_subject(subject)
        self._clock = clock
        self._validity = validity
        self._resign_before = resign_before
        self._headers: dict[str, tuple[str, float]] = {}
        self.signatures = 0

    def authorization(self, audience: str) -> str:
        """The ``vapid t=<jwt>,k=<key>`` header for the push service at ``audience``."""
        now = self._clock()
        cached = self._headers.get(audience)
        if cached is not None and cached[1] - now > self._resign_before:
            return cached[0]
        expires = int(now + self._validity)
        claims = {"aud": audience, "exp": expires, "sub": self._subject}
        header = str(self._vapid.sign(claims)["Authorization"])
        if len(self._headers) >= MAX_AUDIENCES:
            # Push services are a handful of origins; this only bounds a misconfiguration.
            self._headers.clear()
        self._headers[audience] = (header, float(expires))
        self.signatures += 1
        return header
