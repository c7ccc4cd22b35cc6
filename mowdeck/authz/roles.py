"""Roles as tuples: what ``mowdeck grant`` writes for admin, operator and viewer."""

from __future__ import annotations

import typing
import uuid

from mowdeck.authz._tuples import Tuple, account_object, group_object, user_ref

__all__ = ["ROLES", "Role", "grant_tuples", "revoke_tuples"]

Role = typing.Literal["admin", "operator", "viewer"]
ROLES: tuple[Role, ...] = typing.get_args(Role)
# A group role can only be operator or viewer; an admin of a group means the account's admin.
GROUP_ROLES: tuple[Role, ...] = ("operator", "viewer")


def _check(role: str, group_id: str | None) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if group_id is not None and role not in GROUP_ROLES:
        raise ValueError(f"a group role must be one of {', '.join(GROUP_ROLES)}, not {role!r}")


def grant_tuples(
    account_id: uuid.UUID, user_id: str, role: str, group_id: str | None = None
) -> list[Tuple]:
    """The tuples that give ``user_id`` ``role`` on the account, or on its group ``group_id``."""
    _check(role, group_id)
    user, account = user_ref(user_id), account_object(account_id)
    if group_id is None:
        return [Tuple(user, role, account), Tuple(user, "member", account)]
    group = group_object(group_id)
    return [
        Tuple(account, "account", group),
        Tuple(user, role, group),
        Tuple(user, "member", account),
    ]


def revoke_tuples(
    account_id: uuid.UUID, user_id: str, role: str, group_id: str | None = None
) -> list[Tuple]:
    """The tuples to delete to take ``role`` away again (membership of the account stays)."""
    _check(role, group_id)
    user = user_ref(user_id)
    target = account_object(account_id) if group_id is None else group_object(group_id)
    return [Tuple(user, role, target)]
