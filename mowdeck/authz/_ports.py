"""The ports: ``Authorizer`` (what services ask) and ``TupleStore`` (where tuples live)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from mowdeck.authz._tuples import Tuple

__all__ = ["Authorizer", "TupleStore"]


class Authorizer(Protocol):
    """Relationship-based authorization over the model in ``model.fga``."""

    async def check(self, user: str, relation: str, object: str) -> bool:
        """Whether ``user`` has ``relation`` on ``object``."""
        ...

    async def check_many(self, users: Sequence[str], relation: str, object: str) -> dict[str, bool]:
        """``check`` for many users and one object in one round trip."""
        ...

    async def check_pairs(
        self, pairs: Sequence[tuple[str, str]], relation: str
    ) -> dict[tuple[str, str], bool]:
        """``check`` for many ``(user, object)`` pairs and one relation in one round trip."""
        ...

    async def list_objects(self, user: str, relation: str, type: str) -> set[str]:
        """The objects of ``type`` (as ``type:id``) on which ``user`` has ``relation``."""
        ...

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """Add and remove tuples atomically; existing writes and missing deletes are no-ops."""
        ...

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        """Stored tuples matching the filter; ``object`` may be ``"type:"`` for a whole type."""
        ...

    async def delete_object(self, object: str) -> int:
        """Remove every tuple whose object is ``object``; returns how many."""
        ...

    def invalidate(self) -> None:
        """Forget cached decisions (after ``identity.grants.changed``)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class TupleStore(Protocol):
    """Storage of tuples with the few lookups the in-process evaluator needs."""

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """Add and remove tuples in one transaction; duplicates and missing ones are ignored."""
        ...

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        """Tuples matching every given filter, sorted; ``object`` may be ``"type:"``."""
        ...

    async def contains_any(self, object: str, relation: str, users: Collection[str]) -> bool:
        """Whether ``object#relation`` holds any of ``users`` exactly."""
        ...

    async def usersets(self, object: str, relation: str) -> list[str]:
        """The userset users (``type:id#rel``) written on ``object#relation``."""
        ...

    async def objects_with(self, type: str, relation: str, users: Collection[str]) -> set[str]:
        """Objects of ``type`` whose ``relation`` holds any of ``users`` exactly."""
        ...

    async def object_tuples(
        self, objects: Collection[str], users: Collection[str], relations: Collection[str]
    ) -> list[Tuple]:
        """The tuples on ``objects`` whose user is one of ``users`` or a userset, or whose
        relation is one of ``relations`` (any user), in no particular order."""
        ...

    async def delete_object(self, object: str) -> int:
        """Remove every tuple whose object is ``object``; returns how many."""
        ...
