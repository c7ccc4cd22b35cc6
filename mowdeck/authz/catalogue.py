"""The permission catalogue: named keys for people and screens, and which key implies which.

A key says in a word what a role allows on an account (``mower.view``, ``mower.operate``),
for a UI to show and to decide which controls to offer. The services never decide by
keys: every route asks the model (``can_view`` on ``mower:<id>`` and so on), because a
viewer of one group must see exactly that group's mowers, which an account-wide key
cannot say. Each key names the account relation of the model that grants it.

``telemetry.view`` is implied by ``mower.view`` (ADR 0017): whoever may see a mower may see
its state, history, track and command timeline.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mowdeck.authz.roles import ROLES, Role

__all__ = ["PERMISSIONS", "Permission", "implied_keys", "role_keys"]


@dataclass(frozen=True, slots=True)
class Permission:
    """One key of the catalogue."""

    key: str
    relation: str  # the account relation of model.fga that grants it
    description: str
    implies: tuple[str, ...] = ()


PERMISSIONS: dict[str, Permission] = {
    p.key: p
    for p in (
        Permission(
            "mower.admin",
            "can_admin_mowers",
            "register, rename, move and remove the account's mowers",
            implies=("mower.operate",),
        ),
        Permission(
            "mower.operate",
            "can_operate_mowers",
            "send commands to the account's mowers",
            implies=("mower.view",),
        ),
        Permission(
            "mower.view",
            "can_view_mowers",
            "see the account's mowers",
            implies=("telemetry.view",),
        ),
        Permission(
            "telemetry.view",
            "can_view_mowers",
            "see the mowers' state, history, track and command timeline",
        ),
    )
}

_ROLE_KEY: dict[Role, str] = {
    "admin": "mower.admin",
    "operator": "mower.operate",
    "viewer": "mower.view",
}


def implied_keys(keys: Iterable[str]) -> frozenset[str]:
    """``keys`` with every key they imply, transitively; an unknown key is a ValueError."""
    found: set[str] = set()
    pending = list(keys)
    while pending:
        key = pending.pop()
        if key in found:
            continue
        permission = PERMISSIONS.get(key)
        if permission is None:
            raise ValueError(f"unknown permission key {key!r}")
        found.add(key)
        pending.extend(permission.implies)
    return frozenset(found)


def role_keys(role: str) -> frozenset[str]:
    """The keys an account-wide ``role`` (admin, operator, viewer) gives."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    return implied_keys([_ROLE_KEY[role]])
