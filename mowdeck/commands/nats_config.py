"""``mowdeck nats-config``: the NATS server configuration with one user per service.

Writes into ``--dir``: ``auth.conf`` (the users and their permissions from
``kit/bus_permissions.py``), ``nats-<i>.conf`` per node (JetStream, the cluster routes,
``include auth.conf``) and ``<user>.env`` per user with ``MOWDECK_NATS_USER`` and
``MOWDECK_NATS_PASSWORD``. Passwords already in an env file are kept, unless the user is
named with ``--rotate``; new ones are random. With ``--auth nkey`` each user is an NKey
instead: ``<user>.nk`` holds its seed (kept like a password, new with ``--rotate``), the
server knows only its public key, and ``<user>.env`` names the seed file
(``MOWDECK_NATS_NKEY_SEED_FILE``, under ``--secrets-path`` as the service sees it).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from pathlib import Path

import nkeys

from mowdeck.kit.bus_permissions import ADMIN, USERS

__all__ = [
    "auth_config",
    "configure",
    "fresh_passwords",
    "new_seed",
    "node_config",
    "public_key",
    "run",
    "write_config",
]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck nats-config``."""
    parser.add_argument("--dir", required=True, type=Path, help="folder to write into")
    parser.add_argument("--nodes", type=int, default=3, choices=range(1, 8), metavar="N")
    parser.add_argument(
        "--host", default="nats-{i}", help="a node's host name for routes ({i}: its index)"
    )
    parser.add_argument("--client-port", type=int, default=4222)
    parser.add_argument("--cluster-port", type=int, default=6222)
    parser.add_argument("--store-dir", default="/data", help="JetStream store on each node")
    parser.add_argument(
        "--auth",
        choices=("password", "nkey"),
        default="password",
        help="user and password per service (default), or an NKey seed file per service",
    )
    parser.add_argument(
        "--secrets-path",
        default=None,
        help="where the services find the seed files (default: --dir)",
    )
    parser.add_argument(
        "--rotate",
        action="append",
        default=[],
        metavar="USER",
        help="give USER a new password (repeatable; 'all' for every user)",
    )


def _q(text: str) -> str:
    # JSON strings are NATS config strings; quoting keeps "$JS..." from reading as a variable.
    return json.dumps(text)


def _list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(_q(i) for i in items) + "]"


def auth_config(
    passwords: dict[str, str] | None = None, *, public_keys: dict[str, str] | None = None
) -> str:
    """The ``authorization`` block: every user, its password (or NKey) and permissions."""
    lines = ["authorization {", "  users = ["]
    for u in (*USERS, ADMIN):
        if public_keys is not None:
            who = f"nkey: {_q(public_keys[u.name])}"
        else:
            assert passwords is not None
            who = f"user: {_q(u.name)}, password: {_q(passwords[u.name])}"
        lines += [
            f"    # {u.name}: {u.purpose}",
            f"    {{ {who}, permissions: {{",
            f"        publish: {{ allow: {_list(u.publish)} }},",
            f"        subscribe: {{ allow: {_list(u.subscribe)} }},",
            "        allow_responses: true } },",
        ]
    lines += ["  ]", "}", ""]
    return "\n".join(lines)


def new_seed() -> str:
    """A new NKey user seed (``SU...``)."""
    return bytes(nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER)).decode()


def public_key(seed: str) -> str:
    """The public key (``U...``) of an NKey seed."""
    return bytes(nkeys.from_seed(seed.encode()).public_key).decode()


def fresh_passwords() -> dict[str, str]:
    """A new random password for every user (``admin`` included)."""
    return {u.name: secrets.token_urlsafe(24) for u in (*USERS, ADMIN)}


def node_config(index: int, args: argparse.Namespace) -> str:
    """One node's configuration: name, JetStream, routes to every node, the users."""
    hosts = [args.host.format(i=i) for i in range(args.nodes)]
    lines = [
        f"server_name: {_q(f'nats-{index}')}",
        f"listen: {_q(f'0.0.0.0:{args.client_port}')}",
        "http: 8222",
        f"jetstream {{ store_dir: {_q(args.store_dir)} }}",
    ]
    if args.nodes > 1:
        routes = [f"nats-route://{h}:{args.cluster_port}" for h in hosts]
        lines.append(
            f"cluster {{ name: mowdeck, listen: {_q(f'0.0.0.0:{args.cluster_port}')},"
            f" routes: {_list(tuple(routes))} }}"
        )
    lines += ['include "auth.conf"', ""]
    return "\n".join(lines)


def _read_password(path: Path) -> str | None:
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MOWDECK_NATS_PASSWORD" and value.strip():
            return value.strip()
    return None


def _write_nkeys(args: argparse.Namespace, rotate: set[str]) -> tuple[str, list[Path]]:
    folder: Path = args.dir
    inside = Path(getattr(args, "secrets_path", None) or folder.resolve())
    keys: dict[str, str] = {}
    written: list[Path] = []
    for u in (*USERS, ADMIN):
        seed_file = folder / f"{u.name}.nk"
        kept = None
        if seed_file.exists() and not {"all", u.name} & rotate:
            kept = seed_file.read_text().strip() or None
        seed = kept or new_seed()
        _write_secret(seed_file, seed + "\n")
        keys[u.name] = public_key(seed)
        env = folder / f"{u.name}.env"
        _write_secret(env, f"MOWDECK_NATS_NKEY_SEED_FILE={inside / seed_file.name}\n")
        written += [seed_file, env]
    return auth_config(public_keys=keys), written


def _write_passwords(args: argparse.Namespace, rotate: set[str]) -> tuple[str, list[Path]]:
    folder: Path = args.dir
    passwords: dict[str, str] = {}
    written: list[Path] = []
    for u in (*USERS, ADMIN):
        env = folder / f"{u.name}.env"
        kept = None if {"all", u.name} & rotate else _read_password(env)
        passwords[u.name] = kept or secrets.token_urlsafe(24)
        text = f"MOWDECK_NATS_USER={u.name}\nMOWDECK_NATS_PASSWORD={passwords[u.name]}\n"
        _write_secret(env, text)
        written.append(env)
    return auth_config(passwords), written


def write_config(args: argparse.Namespace) -> list[Path]:
    """Write every file; returns their paths."""
    folder: Path = args.dir
    folder.mkdir(parents=True, exist_ok=True)
    rotate = set(args.rotate)
    if getattr(args, "auth", "password") == "nkey":
        text, written = _write_nkeys(args, rotate)
    else:
        text, written = _write_passwords(args, rotate)
    auth = folder / "auth.conf"
    _write_secret(auth, text)
    written.append(auth)
    for i in range(args.nodes):
        node = folder / f"nats-{i}.conf"
        node.write_text(node_config(i, args))
        written.append(node)
    return written


def _write_secret(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def run(args: argparse.Namespace) -> int:
    """Write the configuration and say what was written."""
    for path in write_config(args):
        print(path)
    return 0
