"""Verification and signing keys from settings, and which algorithm each one serves."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key

from mowdeck.authn._settings import AuthSettings
from mowdeck.kit.settings import SettingsError

__all__ = [
    "ALGORITHMS",
    "MIN_SECRET_BYTES",
    "SigningKey",
    "VerificationKey",
    "signing_key",
    "verification_keys",
]

# EdDSA and ES256 for production, HS256 for development; nothing else, never "none".
ALGORITHMS = ("EdDSA", "ES256", "HS256")
MIN_SECRET_BYTES = 32


@dataclass(frozen=True)
class VerificationKey:
    """A key that verifies tokens of one algorithm, with its ``kid`` if it has one."""

    algorithm: str
    key: Any
    kid: str | None = None


@dataclass(frozen=True)
class SigningKey:
    """The key ``mowdeck token`` signs with."""

    algorithm: str
    key: Any
    kid: str | None = None


def _algorithm_of(key: object, source: str) -> str:
    if isinstance(key, ed25519.Ed25519PublicKey | ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey) and isinstance(
        key.curve, ec.SECP256R1
    ):
        return "ES256"
    raise SettingsError(f"{source}: only Ed25519 (EdDSA) and P-256 (ES256) keys are accepted")


def _read(path: str, variable: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise SettingsError(f"{variable}: cannot read {path} ({err.strerror})") from err


def _secret(settings: AuthSettings) -> bytes | None:
    if not settings.jwt_secret:
        return None
    secret = settings.jwt_secret.encode()
    if len(secret) < MIN_SECRET_BYTES:
        raise SettingsError(f"MOWDECK_JWT_SECRET: use at least {MIN_SECRET_BYTES} bytes")
    return secret


def _private_key(settings: AuthSettings) -> Any:
    if not settings.jwt_private_key_file:
        return None
    data = _read(settings.jwt_private_key_file, "MOWDECK_JWT_PRIVATE_KEY_FILE")
    try:
        return load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise SettingsError(f"MOWDECK_JWT_PRIVATE_KEY_FILE: not a PEM private key ({err})") from err


def _public_keys(settings: AuthSettings) -> list[VerificationKey]:
    keys: list[VerificationKey] = []
    if settings.jwt_key_file:
        data = _read(settings.jwt_key_file, "MOWDECK_JWT_KEY_FILE")
        try:
            public = load_pem_public_key(data)
        except ValueError as err:
            raise SettingsError(f"MOWDECK_JWT_KEY_FILE: not a PEM public key ({err})") from err
        keys.append(VerificationKey(_algorithm_of(public, "MOWDECK_JWT_KEY_FILE"), public))
    elif (private := _private_key(settings)) is not None:
        alg = _algorithm_of(private, "MOWDECK_JWT_PRIVATE_KEY_FILE")
        keys.append(VerificationKey(alg, private.public_key(), settings.jwt_key_id))
    if settings.jwt_jwks_file:
        keys.extend(_jwks(settings.jwt_jwks_file))
    return keys


def _jwks(path: str) -> list[VerificationKey]:
    try:
        document = json.loads(_read(path, "MOWDECK_JWT_JWKS_FILE"))
        jwks = jwt.PyJWKSet.from_dict(document)
    except (ValueError, jwt.PyJWKError, jwt.PyJWKSetError) as err:
        raise SettingsError(f"MOWDECK_JWT_JWKS_FILE: not a usable JWKS ({err})") from err
    keys = []
    for jwk in jwks.keys:
        if jwk.public_key_use not in (None, "sig"):
            continue
        if jwk.algorithm_name not in ALGORITHMS or jwk.algorithm_name == "HS256":
            raise SettingsError(f"MOWDECK_JWT_JWKS_FILE: algorithm {jwk.algorithm_name} refused")
        keys.append(VerificationKey(jwk.algorithm_name, jwk.key, jwk.key_id))
    return keys


def _configured(settings: AuthSettings, available: set[str]) -> tuple[str, ...]:
    if settings.jwt_algorithms:
        refused = [a for a in settings.jwt_algorithms if a not in ALGORITHMS]
        if refused:
            raise SettingsError(
                f"MOWDECK_JWT_ALGORITHMS: {', '.join(refused)} refused; use {', '.join(ALGORITHMS)}"
            )
        missing = [a for a in settings.jwt_algorithms if a not in available]
        if missing:
            raise SettingsError(
                f"MOWDECK_JWT_ALGORITHMS: no key configured for {', '.join(missing)}"
            )
        return tuple(settings.jwt_algorithms)
    if not available:
        raise SettingsError(
            "no JWT key configured: set MOWDECK_JWT_KEY_FILE or MOWDECK_JWT_JWKS_FILE "
            "(or MOWDECK_JWT_SECRET in development)"
        )
    return tuple(a for a in ALGORITHMS if a in available)


def verification_keys(settings: AuthSettings) -> dict[str, list[VerificationKey]]:
    """The keys per accepted algorithm; raises ``SettingsError`` on an unusable setup."""
    keys = _public_keys(settings)
    secret = _secret(settings)
    if secret is not None:
        keys.append(VerificationKey("HS256", secret))
    algorithms = _configured(settings, {k.algorithm for k in keys})
    return {alg: [k for k in keys if k.algorithm == alg] for alg in algorithms}


def signing_key(settings: AuthSettings) -> SigningKey:
    """The private key (or, in development, the HS256 secret) tokens are minted with."""
    private = _private_key(settings)
    if private is not None:
        alg = _algorithm_of(private, "MOWDECK_JWT_PRIVATE_KEY_FILE")
        candidates = {alg: SigningKey(alg, private, settings.jwt_key_id)}
    else:
        candidates = {}
    secret = _secret(settings)
    if secret is not None:
        candidates["HS256"] = SigningKey("HS256", secret, settings.jwt_key_id)
    algorithms = settings.jwt_algorithms or ALGORITHMS
    for alg in algorithms:
        if alg in candidates:
            return candidates[alg]
    raise SettingsError(
        "no signing key for the configured algorithms: set MOWDECK_JWT_PRIVATE_KEY_FILE "
        "(or MOWDECK_JWT_SECRET in development)"
    )
