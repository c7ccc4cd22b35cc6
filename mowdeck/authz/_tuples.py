"""Relationship tuples, OpenFGA-style references and the package's errors."""

from __future__ import annotations

import uuid

import msgspec

from mowdeck.errors import MowdeckError

__all__ = [
    "AuthzError",
    "AuthzUnavailableError",
    "InvalidTupleError",
    "Tuple",
    "account_object",
    "group_object",
    "mower_object",
    "object_type",
    "site_object",
    "split_object",
    "split_userset",
    "user_ref",
]


class AuthzError(MowdeckError):
    """Root of the authorization package's errors."""


class InvalidTupleError(AuthzError):
    """A tuple, object, user or relation the model does not allow."""


class AuthzUnavailableError(AuthzError):
    """The authorization backend (OpenFGA or the tuple store) could not answer."""


class Tuple(msgspec.Struct, frozen=True, order=True):
    """One relationship: ``user`` has ``relation`` on ``object`` (OpenFGA string forms)."""

    user: str
    relation: str
    object: str


def user_ref(user_id: str) -> str:
    """The OpenFGA user string of a person: ``user:<id>``."""
    return f"user:{user_id}"


def account_object(account_id: uuid.UUID | str) -> str:
    """The OpenFGA object of an account: ``account:<uuid>``."""
    return f"account:{account_id}"


def mower_object(mower_id: uuid.UUID | str) -> str:
    """The OpenFGA object of a mower: ``mower:<uuid>``."""
    return f"mower:{mower_id}"


def group_object(group_id: str) -> str:
    """The OpenFGA object of a group: ``group:<id>``."""
    return f"group:{group_id}"


def site_object(site_id: uuid.UUID | str) -> str:
    """The OpenFGA object of a site: ``site:<uuid>``."""
    return f"site:{site_id}"


def split_object(ref: str) -> tuple[str, str]:
    """``"type:id"`` as ``(type, id)``; raises ``InvalidTupleError`` on another shape."""
    kind, sep, ident = ref.partition(":")
    if not sep or not kind or not ident or "#" in ref:
        raise InvalidTupleError(f"{ref!r} is not an object of the form type:id")
    return kind, ident


def object_type(ref: str) -> str:
    """The type of ``"type:id"`` or ``"type:id#relation"``."""
    return ref.partition(":")[0]


def split_userset(ref: str) -> tuple[str, str | None]:
    """``"type:id#rel"`` as ``("type:id", "rel")``; a plain object gives ``(ref, None)``."""
    obj, sep, relation = ref.partition("#")
    split_object(obj)
    if sep and not relation:
        raise InvalidTupleError(f"{ref!r} names no relation after '#'")
    return obj, (relation if sep else None)
