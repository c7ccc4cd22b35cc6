"""Tuples in a Python set: the in-memory ``TupleStore`` for unit tests and the demo."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from mowdeck.authz._ports import TupleStore
from mowdeck.authz._tuples import Tuple, object_type

__all__ = ["InMemoryTupleStore", "matches"]


def matches(t: Tuple, user: str | None, relation: str | None, object: str | None) -> bool:
    """Whether ``t`` passes a read filter (``object`` may be ``"type:"``)."""
    if user is not None and t.user != user:
        return False
    if relation is not None and t.relation != relation:
        return False
    if object is None:
        return True
    if object.endswith(":"):
        return t.object.startswith(object)
    return t.object == object


class InMemoryTupleStore(TupleStore):
    """A ``TupleStore`` in memory; same contract as ``PostgresTupleStore``."""

    def __init__(self, tuples: Collection[Tuple] = ()) -> None:
        self._tuples: set[Tuple] = set(tuples)

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """Remove ``deletes``, then add ``writes``."""
        self._tuples.difference_update(deletes)
        self._tuples.update(writes)

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        """Tuples matching every given filter, sorted by object, relation and user."""
        found = [t for t in self._tuples if matches(t, user, relation, object)]
        return sorted(found, key=lambda t: (t.object, t.relation, t.user))

    async def contains_any(self, object: str, relation: str, users: Collection[str]) -> bool:
        """Whether ``object#relation`` holds any of ``users``."""
        return any(Tuple(u, relation, object) in self._tuples for u in users)

    async def usersets(self, object: str, relation: str) -> list[str]:
        """The userset users on ``object#relation``."""
        return sorted(
            t.user
            for t in self._tuples
            if t.object == object and t.relation == relation and "#" in t.user
        )

    async def objects_with(self, type: str, relation: str, users: Collection[str]) -> set[str]:
        """Objects of ``type`` whose ``relation`` holds any of ``users``."""
        wanted = set(users)
        return {
            t.object
            for t in self._tuples
            if t.relation == relation and t.user in wanted and object_type(t.object) == type
        }

    async def object_tuples(
        self, objects: Collection[str], users: Collection[str], relations: Collection[str]
    ) -> list[Tuple]:
        """The tuples on ``objects`` for ``users``, usersets or ``relations``."""
        on, who, which = set(objects), set(users), set(relations)
        return [
            t
            for t in self._tuples
            if t.object in on and (t.user in who or "#" in t.user or t.relation in which)
        ]

    async def delete_object(self, object: str) -> int:
        """Remove the tuples whose object is ``object``."""
        gone = {t for t in self._tuples if t.object == object}
        self._tuples -= gone
        return len(gone)
