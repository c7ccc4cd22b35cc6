"""``mowdeck token``: mint a development JWT with the settings the services read."""

from __future__ import annotations

import argparse
import uuid

from mowdeck.authn._settings import load_auth_settings
from mowdeck.authn._tokens import TokenIssuer


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck token``."""
    parser.add_argument("--account", required=True, type=uuid.UUID, help="account UUID")
    parser.add_argument("--user", required=True, help="user id (the token's sub)")
    parser.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (3600)")


def run(args: argparse.Namespace) -> int:
    """Print a token for ``--user`` in ``--account``."""
    if args.ttl <= 0:
        raise SystemExit("mowdeck token: --ttl must be positive")
    if not args.user:
        raise SystemExit("mowdeck token: --user must not be empty")
    issuer = TokenIssuer(load_auth_settings())
    try:
        token = issuer.mint(args.user, args.account, args.ttl)
    except ValueError as err:
        raise SystemExit(f"mowdeck token: {err}") from err
    print(token)
    return 0
