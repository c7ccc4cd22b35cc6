"""In-process evaluator of the model over a ``TupleStore`` (the demo's and tests' adapter)."""

from __future__ import annotations

from collections.abc import Sequence

from mowdeck.authz._model import (
    AuthorizationModel,
    Computed,
    Difference,
    Intersection,
    Rewrite,
    This,
    TupleToUserset,
    Union,
    load_model,
)
from mowdeck.authz._ports import TupleStore
from mowdeck.authz._snapshot import Snapshot, tupleset_relations
from mowdeck.authz._tuples import (
    AuthzError,
    InvalidTupleError,
    Tuple,
    object_type,
    split_object,
    split_userset,
)

__all__ = ["MAX_DEPTH", "LocalAuthorizer"]

# OpenFGA's default resolution depth; deeper chains are refused like the server does.
MAX_DEPTH = 25
# Rounds of the fixed point for list_objects on a recursive model (group#member in group).
_MAX_ROUNDS = 25


class LocalAuthorizer:
    """Evaluates the same model as OpenFGA, generically, over tuples in a ``TupleStore``."""

    def __init__(self, store: TupleStore, model: AuthorizationModel | None = None) -> None:
        self.store = store
        self.model = model if model is not None else load_model()
        self._tuplesets = tupleset_relations(self.model)

    async def check(self, user: str, relation: str, object: str) -> bool:
        """Whether ``user`` has ``relation`` on ``object``."""
        return (await self.check_many([user], relation, object))[user]

    async def check_many(self, users: Sequence[str], relation: str, object: str) -> dict[str, bool]:
        """``check`` for each user on one object, the tuples read once for all of them."""
        answers = await self.check_pairs([(u, object) for u in users], relation)
        return {user: answers[(user, object)] for user in users}

    async def check_pairs(
        self, pairs: Sequence[tuple[str, str]], relation: str
    ) -> dict[tuple[str, str], bool]:
        """``check`` for each ``(user, object)`` pair, the tuples read once for all of them.

        Each pair is still walked on its own (same order, same cycle cuts), over a
        snapshot that holds, per object reached, the tuples of every one of the users.
        """
        for user, obj in pairs:
            self._validate_query(user, relation, obj)
        if not pairs:
            return {}
        snapshot = Snapshot(self.store, {u for u, _ in pairs}, self._tuplesets)
        await snapshot.prefetch({o for _, o in pairs})
        return {
            (user, obj): await _Check(self.model, snapshot, user).relation(relation, obj, ())
            for user, obj in pairs
        }

    async def list_objects(self, user: str, relation: str, type: str) -> set[str]:
        """The objects of ``type`` on which ``user`` has ``relation``, by reverse evaluation."""
        self.model.rewrite(type, relation)
        split_userset(user)
        return await _ListObjects(self.model, self.store, user).run(type, relation)

    async def write(self, writes: Sequence[Tuple], deletes: Sequence[Tuple] = ()) -> None:
        """Validate the writes against the model, then store writes and deletes atomically."""
        for t in writes:
            self.model.validate_tuple(t.user, t.relation, t.object)
        for t in deletes:
            split_object(t.object)
            split_userset(t.user)
        if set(writes) & set(deletes):
            raise InvalidTupleError("a tuple cannot be written and deleted at once")
        await self.store.write(writes, deletes)

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        """Stored tuples matching the filter."""
        return await self.store.read(user=user, relation=relation, object=object)

    async def delete_object(self, object: str) -> int:
        """Remove every tuple whose object is ``object``."""
        split_object(object)
        return await self.store.delete_object(object)

    def invalidate(self) -> None:
        """Nothing to forget: every call reads the store afresh."""

    async def close(self) -> None:
        """Nothing to release: the store's pool belongs to the caller."""

    def _validate_query(self, user: str, relation: str, obj: str) -> None:
        kind, _ = split_object(obj)
        self.model.rewrite(kind, relation)
        split_userset(user)


class _Check:
    """One forward check: depth-first, with the path kept to cut cycles."""

    def __init__(self, model: AuthorizationModel, tuples: Snapshot, user: str) -> None:
        self.model = model
        self.tuples = tuples
        self.user = user
        self.plain = "#" not in user
        # Only successes are remembered: a failure may stem from a cycle cut on this path.
        self.granted: set[tuple[str, str]] = set()

    async def relation(self, relation: str, obj: str, path: tuple[tuple[str, str], ...]) -> bool:
        key = (relation, obj)
        if key in self.granted:
            return True
        if key in path:
            return False  # a cycle adds nothing to what the other branches find
        if len(path) >= MAX_DEPTH:
            raise AuthzError(f"resolution of {relation} on {obj} exceeds depth {MAX_DEPTH}")
        rewrite = self.model.rewrite(object_type(obj), relation)
        result = await self.rewrite(rewrite, relation, obj, (*path, key))
        if result:
            self.granted.add(key)
        return result

    async def rewrite(  # noqa: PLR0911, PLR0912 - one branch per kind of rewrite
        self, node: Rewrite, relation: str, obj: str, path: tuple[tuple[str, str], ...]
    ) -> bool:
        match node:
            case This():
                return await self._direct(relation, obj, path)
            case Computed(relation=other):
                return await self.relation(other, obj, path)
            case TupleToUserset(tupleset=tupleset, computed=computed):
                for parent in await self.tuples.tupleset(obj, tupleset):
                    if "#" in parent or not self.model.has_relation(object_type(parent), computed):
                        continue
                    if await self.relation(computed, parent, path):
                        return True
                return False
            case Union(children=children):
                for child in children:
                    if await self.rewrite(child, relation, obj, path):
                        return True
                return False
            case Intersection(children=children):
                for child in children:
                    if not await self.rewrite(child, relation, obj, path):
                        return False
                return True
            case Difference(base=base, subtract=subtract):
                if not await self.rewrite(base, relation, obj, path):
                    return False
                return not await self.rewrite(subtract, relation, obj, path)
        raise AssertionError(node)  # pragma: no cover - the match is exhaustive

    async def _direct(self, relation: str, obj: str, path: tuple[tuple[str, str], ...]) -> bool:
        allowed = self.model.direct_types(object_type(obj), relation)
        candidates = {self.user}
        user_kind = object_type(self.user)
        if self.plain and any(a.wildcard and a.type == user_kind for a in allowed):
            candidates.add(f"{user_kind}:*")
        if await self.tuples.contains_any(obj, relation, candidates):
            return True
        if not any(a.relation for a in allowed):
            return False
        for userset in await self.tuples.usersets(obj, relation):
            parent, parent_relation = split_userset(userset)
            if parent_relation and await self.relation(parent_relation, parent, path):
                return True
        return False


class _ListObjects:
    """Reverse evaluation: from the user outwards, a bounded number of store queries."""

    def __init__(self, model: AuthorizationModel, store: TupleStore, user: str) -> None:
        self.model = model
        self.store = store
        self.user = user
        self.memo: dict[tuple[str, str], set[str]] = {}
        self.seed: dict[tuple[str, str], set[str]] = {}
        self.active: set[tuple[str, str]] = set()
        self.cyclic = False

    async def run(self, kind: str, relation: str) -> set[str]:
        for _ in range(_MAX_ROUNDS):
            self.memo, self.cyclic = {}, False
            result = await self.objects(kind, relation)
            if not self.cyclic or self.memo == self.seed:
                return result
            self.seed = dict(self.memo)
        raise AuthzError(f"list_objects of {kind}#{relation} did not converge")

    async def objects(self, kind: str, relation: str) -> set[str]:
        # The returned set may be memo's own: callers copy before changing it in place.
        key = (kind, relation)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            # A recursive relation: use the last round's answer; run() repeats until stable.
            self.cyclic = True
            return self.seed.get(key, set())
        self.active.add(key)
        try:
            result = await self.rewrite(self.model.rewrite(kind, relation), kind, relation)
        finally:
            self.active.discard(key)
        self.memo[key] = result
        return result

    async def rewrite(  # noqa: PLR0911, PLR0912 - one branch per kind of rewrite
        self, node: Rewrite, kind: str, relation: str
    ) -> set[str]:
        match node:
            case This():
                return await self._direct(kind, relation)
            case Computed(relation=other):
                return await self.objects(kind, other)
            case TupleToUserset(tupleset=tupleset, computed=computed):
                parents: set[str] = set()
                for allowed in self.model.direct_types(kind, tupleset):
                    if allowed.relation is None and self.model.has_relation(allowed.type, computed):
                        parents |= await self.objects(allowed.type, computed)
                if not parents:
                    return set()
                return await self.store.objects_with(kind, tupleset, parents)
            case Union(children=children):
                found: set[str] = set()
                for child in children:
                    found |= await self.rewrite(child, kind, relation)
                return found
            case Intersection(children=children):
                common = set(await self.rewrite(children[0], kind, relation))
                for child in children[1:]:
                    if not common:
                        break
                    common &= await self.rewrite(child, kind, relation)
                return common
            case Difference(base=base, subtract=subtract):
                kept = set(await self.rewrite(base, kind, relation))
                if kept:
                    kept -= await self.rewrite(subtract, kind, relation)
                return kept
        raise AssertionError(node)  # pragma: no cover - the match is exhaustive

    async def _direct(self, kind: str, relation: str) -> set[str]:
        subjects = {self.user}
        user_kind = object_type(self.user)
        for allowed in self.model.direct_types(kind, relation):
            if allowed.wildcard and allowed.type == user_kind and "#" not in self.user:
                subjects.add(f"{user_kind}:*")
            elif allowed.relation is not None:
                parents = await self.objects(allowed.type, allowed.relation)
                subjects |= {f"{p}#{allowed.relation}" for p in parents}
        return await self.store.objects_with(kind, relation, subjects)
