"""The authorization model as data: OpenFGA's JSON (``fga model transform``) parsed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from mowdeck.authz._tuples import InvalidTupleError, split_object, split_userset

__all__ = [
    "AuthorizationModel",
    "Computed",
    "Difference",
    "Intersection",
    "Rewrite",
    "This",
    "TupleToUserset",
    "TypeRestriction",
    "Union",
    "load_model",
]


@dataclass(frozen=True)
class This:
    """Directly assigned users (``[user, group#member, user:*]``)."""


@dataclass(frozen=True)
class Computed:
    """Another relation of the same object."""

    relation: str


@dataclass(frozen=True)
class TupleToUserset:
    """``computed from tupleset``: the relation on the objects the tupleset points to."""

    tupleset: str
    computed: str


@dataclass(frozen=True)
class Union:
    """Any child grants."""

    children: tuple[Rewrite, ...]


@dataclass(frozen=True)
class Intersection:
    """Every child grants."""

    children: tuple[Rewrite, ...]


@dataclass(frozen=True)
class Difference:
    """``base but not subtract``."""

    base: Rewrite
    subtract: Rewrite


Rewrite = This | Computed | TupleToUserset | Union | Intersection | Difference


@dataclass(frozen=True)
class TypeRestriction:
    """One entry of a relation's ``directly_related_user_types``."""

    type: str
    relation: str | None = None
    wildcard: bool = False


def _rewrite(node: dict[str, Any]) -> Rewrite:
    if "this" in node:
        return This()
    if "computedUserset" in node:
        return Computed(node["computedUserset"]["relation"])
    if "tupleToUserset" in node:
        ttu = node["tupleToUserset"]
        return TupleToUserset(ttu["tupleset"]["relation"], ttu["computedUserset"]["relation"])
    if "union" in node:
        return Union(tuple(_rewrite(c) for c in node["union"]["child"]))
    if "intersection" in node:
        return Intersection(tuple(_rewrite(c) for c in node["intersection"]["child"]))
    if "difference" in node:
        diff = node["difference"]
        return Difference(_rewrite(diff["base"]), _rewrite(diff["subtract"]))
    raise ValueError(f"unsupported rewrite {sorted(node)}")


def _restriction(entry: dict[str, Any]) -> TypeRestriction:
    if entry.get("condition"):
        raise ValueError("conditional relationships are not supported")
    return TypeRestriction(entry["type"], entry.get("relation"), "wildcard" in entry)


class AuthorizationModel:
    """Type definitions: each relation's rewrite and its directly related user types."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.schema_version: str = document.get("schema_version", "1.1")
        self._rewrites: dict[str, dict[str, Rewrite]] = {}
        self._direct: dict[tuple[str, str], tuple[TypeRestriction, ...]] = {}
        for definition in document["type_definitions"]:
            kind = definition["type"]
            relations = definition.get("relations") or {}
            self._rewrites[kind] = {name: _rewrite(node) for name, node in relations.items()}
            meta = (definition.get("metadata") or {}).get("relations") or {}
            for name, info in meta.items():
                types = info.get("directly_related_user_types") or []
                self._direct[(kind, name)] = tuple(_restriction(t) for t in types)

    @classmethod
    def from_json(cls, text: str | bytes) -> AuthorizationModel:
        """Parse the JSON that ``fga model transform`` prints."""
        return cls(json.loads(text))

    @property
    def types(self) -> frozenset[str]:
        """Every type the model defines."""
        return frozenset(self._rewrites)

    def relations(self, kind: str) -> frozenset[str]:
        """The relations ``kind`` defines (none for an unknown type)."""
        return frozenset(self._rewrites.get(kind, {}))

    def has_relation(self, kind: str, relation: str) -> bool:
        """Whether ``kind`` defines ``relation``."""
        return relation in self._rewrites.get(kind, {})

    def rewrite(self, kind: str, relation: str) -> Rewrite:
        """The definition of ``kind#relation``; raises ``InvalidTupleError`` if unknown."""
        try:
            return self._rewrites[kind][relation]
        except KeyError:
            raise InvalidTupleError(f"type {kind!r} has no relation {relation!r}") from None

    def direct_types(self, kind: str, relation: str) -> tuple[TypeRestriction, ...]:
        """The user types that may be written directly on ``kind#relation``."""
        return self._direct.get((kind, relation), ())

    def validate_tuple(self, user: str, relation: str, obj: str) -> None:
        """Refuse a tuple the model would not accept as written."""
        kind, _ = split_object(obj)
        self.rewrite(kind, relation)
        base, user_relation = split_userset(user)
        user_kind, _, user_id = base.partition(":")
        for allowed in self.direct_types(kind, relation):
            if allowed.type != user_kind:
                continue
            if allowed.wildcard and user_id == "*" and user_relation is None:
                return
            if not allowed.wildcard and user_id != "*" and allowed.relation == user_relation:
                return
        raise InvalidTupleError(f"{user!r} may not be written as {relation!r} of {obj!r}")


def load_model() -> AuthorizationModel:
    """The model shipped with Mowdeck (``mowdeck/authz/model.json``)."""
    text = resources.files("mowdeck.authz").joinpath("model.json").read_text()
    return AuthorizationModel.from_json(text)
