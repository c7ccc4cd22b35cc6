"""The verification keys, re-read when their files change, with an overlap for old keys."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import structlog
from cryptography.hazmat.primitives import serialization

from mowdeck.authn._keys import VerificationKey, verification_keys
from mowdeck.authn._settings import AuthSettings
from mowdeck.kit.settings import SettingsError

__all__ = ["KeyRing"]

log = structlog.get_logger("mowdeck.authn")

Stamp = tuple[tuple[int, int, int] | None, ...]
Keys = dict[str, list[VerificationKey]]


def _fingerprint(key: VerificationKey) -> tuple[str, str | None, bytes]:
    material: Any = key.key
    if isinstance(material, bytes):
        raw = material
    else:
        raw = material.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    return key.algorithm, key.kid, raw


def _files(settings: AuthSettings) -> tuple[str, ...]:
    # The files verification_keys reads; the private key only serves when no key file is set.
    first = settings.jwt_key_file or settings.jwt_private_key_file
    return tuple(p for p in (first, settings.jwt_jwks_file) if p)


def _stamp(paths: tuple[str, ...]) -> Stamp:
    stamps: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


class KeyRing:
    """The keys of ``AuthSettings``; files are looked at every ``jwt_key_check_seconds``.

    A key gone from the files still verifies for ``jwt_key_overlap_seconds``, so tokens
    signed before a rotation keep working. A file that cannot be read or parsed keeps
    the last good keys (and is logged); only the first load raises ``SettingsError``.
    """

    def __init__(self, settings: AuthSettings, clock: Callable[[], float] = time.monotonic):
        self._settings = settings
        self._clock = clock
        self._paths = _files(settings)
        self._stamp = _stamp(self._paths)
        self._current = verification_keys(settings)
        self._retired: dict[tuple[str, str | None, bytes], tuple[VerificationKey, float]] = {}
        self._checked = clock()
        self._keys = self._current

    def keys(self) -> Keys:
        """The keys per accepted algorithm now: the files' keys plus those in overlap."""
        now = self._clock()
        if self._paths and now - self._checked >= self._settings.jwt_key_check_seconds:
            self._checked = now
            self._reload(now)
        if any(until <= now for _, until in self._retired.values()):
            self._retired = {f: (k, u) for f, (k, u) in self._retired.items() if u > now}
            self._merge()
        return self._keys

    def _reload(self, now: float) -> None:
        stamp = _stamp(self._paths)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            fresh = verification_keys(self._settings)
        except SettingsError as err:
            log.error("jwt keys not reloaded; the last good keys stay", error=str(err))
            return
        kept = {_fingerprint(k) for keys in fresh.values() for k in keys}
        until = now + self._settings.jwt_key_overlap_seconds
        for keys in self._current.values():
            for key in keys:
                fingerprint = _fingerprint(key)
                if fingerprint not in kept and fingerprint not in self._retired:
                    self._retired[fingerprint] = (key, until)
        for fingerprint in kept:
            self._retired.pop(fingerprint, None)
        self._current = fresh
        self._merge()
        log.info(
            "jwt keys reloaded",
            keys=len(kept),
            in_overlap=len(self._retired),
            algorithms=sorted(fresh),
        )

    def _merge(self) -> None:
        merged: Keys = {alg: list(keys) for alg, keys in self._current.items()}
        for key, _ in self._retired.values():
            merged.setdefault(key.algorithm, []).append(key)
        self._keys = merged
