"""Who the demo signs in as: its account, its user, and a signing key kept across runs."""

from __future__ import annotations

import os
import secrets
import uuid
from pathlib import Path

import msgspec

from mowdeck.authn import AuthSettings, load_auth_settings

__all__ = ["DEMO_ACCOUNT", "DEMO_USER", "demo_auth", "demo_secret"]

DEMO_ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000de30")
DEMO_USER = "demo"


def demo_auth(state_dir: Path) -> tuple[AuthSettings, str]:
    """The auth settings of the demo, and the key file it signs with (if it made one)."""
    auth = load_auth_settings()
    if auth.jwt_secret or auth.jwt_key_file or auth.jwt_jwks_file:
        return auth, ""
    # Development only: an HS256 secret kept in the state folder, so a token printed by
    # an earlier run still works after a restart.
    key = state_dir / "demo-jwt-secret"
    return msgspec.structs.replace(auth, jwt_secret=demo_secret(key)), str(key)


def demo_secret(path: Path) -> str:
    """The demo's token signing secret from ``path``, created (owner-only) on first use."""
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        secret = ""
    if not secret:
        path.parent.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secret + "\n")
    return secret
