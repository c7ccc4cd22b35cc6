"""``mowdeck grant``: give (or ``--revoke``) a user a role on an account, a group or a site."""

from __future__ import annotations

import argparse
import sys
import uuid

import asyncpg

from contracts.v1 import GrantsChanged
from mowdeck.authz._ports import Authorizer
from mowdeck.authz._settings import build_authorizer, load_authz_settings
from mowdeck.authz._tuples import (
    AuthzError,
    AuthzUnavailableError,
    account_object,
    group_object,
    site_object,
)
from mowdeck.authz.roles import ROLES, grant_tuples, revoke_tuples
from mowdeck.commands.identity_events import EventNotPublishedError, publish_identity_event
from mowdeck.kit.migrate import redact_dsn
from mowdeck.kit.pg import session_settings
from mowdeck.kit.settings import BaseSettings, load_settings


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck grant``."""
    parser.add_argument("--account", required=True, type=uuid.UUID, help="account UUID")
    parser.add_argument("--user", required=True, help="user id (a token's sub)")
    parser.add_argument("--role", required=True, choices=ROLES)
    group_or_site = parser.add_mutually_exclusive_group()
    group_or_site.add_argument("--group", default=None, help="grant on this group of the account")
    group_or_site.add_argument(
        "--site", default=None, type=uuid.UUID, help="grant on this site (UUID) of the account"
    )
    parser.add_argument("--revoke", action="store_true", help="take the role away instead")


async def apply(authorizer: Authorizer, args: argparse.Namespace) -> str:
    """Write or delete the role's tuples; returns what was done, in words."""
    try:
        if args.revoke:
            await authorizer.write(
                (), revoke_tuples(args.account, args.user, args.role, args.group, _site(args))
            )
            return f"revoked {args.role} of user {args.user} on {_target(args)}"
        if args.group is not None:
            await _refuse_foreign_group(authorizer, args.account, args.group)
        if _site(args) is not None:
            await _refuse_foreign_site(authorizer, args.account, args.site)
        await authorizer.write(
            grant_tuples(args.account, args.user, args.role, args.group, _site(args))
        )
    except ValueError as err:
        raise AuthzError(str(err)) from err
    return f"granted {args.role} to user {args.user} on {_target(args)}"


def _site(args: argparse.Namespace) -> uuid.UUID | None:
    return getattr(args, "site", None)


def _target(args: argparse.Namespace) -> str:
    if _site(args) is not None:
        return site_object(args.site)
    return group_object(args.group) if args.group else account_object(args.account)


async def _refuse_foreign_site(authorizer: Authorizer, account: uuid.UUID, site: uuid.UUID) -> None:
    # Fleet writes a site's account tuple when it creates the site: none means no such site.
    owners = {t.user for t in await authorizer.read(relation="account", object=site_object(site))}
    if owners != {account_object(account)}:
        raise AuthzError(f"site {site} is not a site of account {account}")


async def _refuse_foreign_group(authorizer: Authorizer, account: uuid.UUID, group: str) -> None:
    owners = await authorizer.read(relation="account", object=group_object(group))
    foreign = [t.user for t in owners if t.user != account_object(account)]
    if foreign:
        raise AuthzError(f"group {group} belongs to {', '.join(foreign)}")


async def run(args: argparse.Namespace) -> int:
    """Grant through the configured adapter (``MOWDECK_AUTHZ``), then say so on the bus.

    The grant is written first; ``identity.grants.changed`` then makes every service drop
    its cached decisions. Exit 3 when the event could not be stored: the grant holds, and
    cached decisions expire within their TTL.
    """
    settings = load_authz_settings()
    base = load_settings(BaseSettings)
    pool: asyncpg.Pool | None = None
    if settings.authz == "local":
        database_url = base.database_url
        try:
            pool = await asyncpg.create_pool(
                database_url,
                min_size=1,
                max_size=2,
                server_settings=session_settings(base.database_statement_timeout_ms),
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as err:
            # A malformed URL lands here too (asyncpg's ClientConfigurationError).
            raise AuthzUnavailableError(f"cannot reach {redact_dsn(database_url)}: {err}") from err
    try:
        authorizer = build_authorizer(settings, pool)
        try:
            print(await apply(authorizer, args))
        finally:
            await authorizer.close()
    finally:
        if pool is not None:
            await pool.close()
    changed = GrantsChanged(account_id=args.account, user_id=args.user, object=_target(args))
    try:
        await publish_identity_event(
            base.nats_url, "identity.grants.changed", changed, account_id=args.account
        )
    except EventNotPublishedError as err:
        print(f"mowdeck grant: the grant holds, but {err}", file=sys.stderr)
        return 3
    return 0
