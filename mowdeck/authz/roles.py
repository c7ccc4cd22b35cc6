"""Roles as tuples: what ``mowdeck grant`` writes for admin, operator and viewer."""

from __future__ import annotations

import typing
import uuid

from mowdeck.authz._tuples import Tuple, account_object, group_object, site_object, user_ref

__all__ = ["ROLES", "Role", "grant_tuples", "revoke_tuples"]

Role = typing.Literal["admin", "operator", "viewer"]
ROLES: tuple[Role, ...] = typing.get_args(Role)
# A group or site role can only be operator or viewer; an admin of either means the
# account's admin.
GROUP_ROLES: tuple[Role, ...] = ("operator", "viewer")


def _check(role: str, group_id: str | None, site_id: uuid.UUID | None = None) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if group_id is not None and site_id is not None:
        raise ValueError("grant on a group or on a site, not both")
    scope = "group" if group_id is not None else "site" if site_id is not None else None
    if scope is not None and role not in GROUP_ROLES:
        raise ValueError(f"a {scope} role must be one of {', '.join(GROUP_ROLES)}, not {role!r}")


def grant_tuples(
    account_id: uuid.UUID,
    user_id: str,
    role: str,
    group_id: str | None = None,
    site_id: uuid.UUID | None = None,
) -> list[Tuple]:
    """The tuples that give ``user_id`` ``role`` on the account, or on its group ``group_id``,
    or on its site ``site_id`` (the site's own ``account`` tuple is Fleet's, written with it)."""
    _check(role, group_id, site_id)
    user, account = user_ref(user_id), account_object(account_id)
    if site_id is not None:
        return [Tuple(user, role, site_object(site_id)), Tuple(user, "member", account)]
    if group_id is None:
        return [Tuple(user, role, account), Tuple(user, "member", account)]
    group = group_object(group_id)
    return [
        Tuple(account, "account", group),
        Tuple(user, role, group),
        Tuple(user, "member", account),
    ]


def revoke_tuples(
    account_id: uuid.UUID,
    user_id: str,
    role: str,
    group_id: str | None = None,
    site_id: uuid.UUID | None = None,
) -> list[Tuple]:
    """The tuples to delete to take ``role`` away again (membership of the account stays)."""
    _check(role, group_id, site_id)
    user = user_ref(user_id)
    if site_id is not None:
        return [Tuple(user, role, site_object(site_id))]
    target = account_object(account_id) if group_id is None else group_object(group_id)
    return [Tuple(user, role, target)]
