"""JWT settings (``MOWDECK_JWT_*``), read like every other settings struct."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec

from mowdeck.kit.settings import load_settings

__all__ = ["AuthSettings", "load_auth_settings"]


class AuthSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How tokens are verified and (in development) minted; every field has a default."""

    # JSON list, e.g. ["EdDSA"]; empty means: HS256 with a secret, else the keys' own.
    jwt_algorithms: tuple[str, ...] = ()
    # Development only: an HS256 secret of at least 32 bytes.
    jwt_secret: str | None = None
    # PEM public key (Ed25519 or P-256) that verifies tokens.
    jwt_key_file: str | None = None
    # PEM private key that `mowdeck token` signs with (its public half also verifies).
    jwt_private_key_file: str | None = None
    # A JWKS document ({"keys": [...]}) with the verification keys, chosen by `kid`.
    jwt_jwks_file: str | None = None
    # `kid` header of minted tokens.
    jwt_key_id: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_leeway_seconds: Annotated[float, msgspec.Meta(ge=0, le=300)] = 30.0
    # How often (at most) a verifier looks whether its key files changed.
    jwt_key_check_seconds: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    # How long a key that vanished from the files still verifies (rotation overlap).
    jwt_key_overlap_seconds: Annotated[float, msgspec.Meta(ge=0)] = 600.0
    # How long a disabled or deleted user stays on the deny-list: longer than any token.
    denylist_ttl_seconds: Annotated[float, msgspec.Meta(ge=60)] = 7 * 24 * 3600.0
    denylist_bucket: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]+$")] = "MOWDECK_DENYLIST"


def load_auth_settings(environ: Mapping[str, str] | None = None) -> AuthSettings:
    """``AuthSettings`` from ``MOWDECK_JWT_*`` variables.

    msgspec cannot combine two field-carrying Struct bases (``BaseSettings`` and this), so
    services read it alongside their own settings instead of inheriting it.
    """
    return load_settings(AuthSettings, environ)
