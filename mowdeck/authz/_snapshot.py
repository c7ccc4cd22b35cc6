"""The tuples a forward check reads, fetched once per object for a whole set of users.

A check walks from the object outwards: the tuples of the tupleset relations (``mower#account``),
the usersets on a relation, and whether a relation holds the user (or ``type:*``). For a set of
users asking about one object those reads are the same but for the user, so ``Snapshot`` asks
the store once per object for all of them (``TupleStore.object_tuples``) and answers each
user's walk from memory, in the order the store's own lookups give.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from mowdeck.authz._model import (
    AuthorizationModel,
    Difference,
    Intersection,
    Rewrite,
    TupleToUserset,
    Union,
)
from mowdeck.authz._ports import TupleStore
from mowdeck.authz._tuples import object_type

__all__ = ["Snapshot", "tupleset_relations"]

# Levels of objects fetched ahead of the walk (mower, its account and groups, the groups'
# account); anything further out is fetched when the walk reaches it.
_PREFETCH_LEVELS = 3


def _tuplesets(node: Rewrite, found: set[str]) -> None:
    match node:
        case TupleToUserset(tupleset=tupleset):
            found.add(tupleset)
        case Union(children=children) | Intersection(children=children):
            for child in children:
                _tuplesets(child, found)
        case Difference(base=base, subtract=subtract):
            _tuplesets(base, found)
            _tuplesets(subtract, found)
        case _:
            pass


def tupleset_relations(model: AuthorizationModel) -> frozenset[str]:
    """Every relation the model follows with ``X from <relation>``."""
    found: set[str] = set()
    for kind in model.types:
        for relation in model.relations(kind):
            _tuplesets(model.rewrite(kind, relation), found)
    return frozenset(found)


class Snapshot:
    """The tuples on the objects a check of ``users`` reaches, read once for all of them."""

    def __init__(
        self, store: TupleStore, users: Collection[str], tuplesets: frozenset[str]
    ) -> None:
        self._store = store
        self._tuplesets = tuplesets
        subjects = set(users)
        # Wildcards are asked for every plain user's type; _Check decides whether they count.
        subjects |= {f"{object_type(u)}:*" for u in users if "#" not in u}
        self._subjects = sorted(subjects)
        # object -> relation -> subjects, sorted like the store's lookups.
        self._tuples: dict[str, dict[str, list[str]]] = {}

    async def prefetch(self, objects: Collection[str]) -> None:
        """Fetch ``objects`` and the objects they point to, a level per query."""
        frontier = set(objects)
        for _ in range(_PREFETCH_LEVELS):
            frontier -= self._tuples.keys()
            if not frontier:
                return
            await self._load(frontier)
            frontier = set(self._pointed_to(frontier))

    async def tupleset(self, obj: str, relation: str) -> list[str]:
        """The users of every tuple on ``obj#relation`` (``relation`` is a tupleset)."""
        return (await self._of(obj)).get(relation, [])

    async def contains_any(self, obj: str, relation: str, users: Collection[str]) -> bool:
        """Whether ``obj#relation`` holds any of ``users`` (all among the snapshot's users)."""
        held = (await self._of(obj)).get(relation, ())
        return any(u in held for u in users)

    async def usersets(self, obj: str, relation: str) -> list[str]:
        """The userset users on ``obj#relation``."""
        return [s for s in (await self._of(obj)).get(relation, ()) if "#" in s]

    async def _of(self, obj: str) -> dict[str, list[str]]:
        if obj not in self._tuples:
            await self._load({obj})
        return self._tuples[obj]

    async def _load(self, objects: set[str]) -> None:
        ordered = sorted(objects)
        for o in ordered:
            self._tuples[o] = {}
        for t in await self._store.object_tuples(ordered, self._subjects, self._tuplesets):
            self._tuples[t.object].setdefault(t.relation, []).append(t.user)
        for relations in (self._tuples[o] for o in ordered):
            for subjects in relations.values():
                subjects.sort()

    def _pointed_to(self, objects: Iterable[str]) -> Iterable[str]:
        for o in objects:
            for relation, subjects in self._tuples[o].items():
                for s in subjects:
                    if "#" in s:
                        yield s.partition("#")[0]
                    elif relation in self._tuplesets and not s.endswith(":*"):
                        yield s
