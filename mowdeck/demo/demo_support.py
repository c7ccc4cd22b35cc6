"""What the demo adds for a person trying it: a lasting key, the console's origins, a ready
mower."""

from __future__ import annotations

import os
import secrets
import socket
import uuid
from collections.abc import Collection
from pathlib import Path

import msgspec

from mowdeck.authn import AuthSettings, load_auth_settings
from simulator.fleet import SimulatorFleet

__all__ = [
    "console_origins",
    "demo_auth",
    "demo_secret",
    "device_hosts",
    "free_port",
    "ready_mower",
]


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


def ready_mower(
    fleet: SimulatorFleet, busy: Collection[uuid.UUID] = ()
) -> tuple[uuid.UUID | None, str]:
    """The mower the banner's examples use: one that leaves the dock at once, if any.

    A docked mower below its resume level charges first; a start is executed at once but
    the state reads ``charging`` until the battery reaches that level. Mowers in ``busy``
    (the demo's scenario commands them) are taken only when no other is left.
    """
    free = [m for m in fleet.mowers if m.mower_id not in busy] or fleet.mowers
    if not free:
        return None, ""
    fullest = max(free, key=lambda m: m.body.battery)
    level = fullest.params.resume_level
    if fullest.body.battery >= level:
        return fullest.mower_id, ""
    return fullest.mower_id, (
        f"this mower is charging at {fullest.body.battery:.0f} %: it leaves the dock at "
        f"{level:.0f} %, so its state reads charging for a while after executed"
    )


def free_port(host: str) -> int:
    """A port free on ``host`` now, for a server started a little later."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def device_hosts(host: str, port: int) -> list[str]:
    """``MOWDECK_GATEWAY_DEVICE_HOSTS`` for a simulator on ``host:port``: that port only.

    Listing the whole host would let a registration dial any service of the machine the
    demo runs on (its PostgreSQL, its NATS).
    """
    return [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]


def console_origins(host: str, port: int) -> list[str]:
    """The origins a browser may load the console from, served on ``host:port``."""
    names = {host, "localhost", "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {host}
    return sorted(f"http://{name}:{port}" for name in names)
