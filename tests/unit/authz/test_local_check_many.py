"""``check_many`` answers as the real engine does, with store reads independent of the users."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

import pytest

from mowdeck.authz import (
    AuthorizationModel,
    InMemoryTupleStore,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    group_object,
    load_model,
    mower_object,
    user_ref,
)
from mowdeck.authz.fgatest import default_test_file, load_test_file
from tests.unit.authz.test_model_conformance import GENERIC, fga_transform


async def _check_many_failures(path: Path, model: AuthorizationModel) -> tuple[int, list[str]]:
    """Every check of the file asked as one ``check_many`` per relation and object."""
    document = load_test_file(path)
    base = [Tuple(t["user"], t["relation"], t["object"]) for t in document.get("tuples") or []]
    asked, failures = 0, []
    for test in document["tests"]:
        authorizer = LocalAuthorizer(InMemoryTupleStore(), model)
        extra = [Tuple(t["user"], t["relation"], t["object"]) for t in test.get("tuples") or []]
        await authorizer.write([*base, *extra])
        expected: dict[tuple[str, str], dict[str, bool]] = defaultdict(dict)
        for case in test.get("check") or []:
            for relation, allowed in case["assertions"].items():
                expected[(relation, case["object"])][case["user"]] = allowed
        for (relation, obj), answers in expected.items():
            got = await authorizer.check_many(list(answers), relation, obj)
            asked += len(answers)
            if got != answers:
                failures.append(f"{test['name']}: {relation} on {obj}: {got} != {answers}")
        # And every object of the test at once, per relation.
        for relation in {r for r, _ in expected}:
            pairs = {
                (user, obj): allowed
                for (r, obj), answers in expected.items()
                if r == relation
                for user, allowed in answers.items()
            }
            got_pairs = await authorizer.check_pairs(list(pairs), relation)
            if got_pairs != pairs:
                failures.append(f"{test['name']}: check_pairs of {relation}")
    return asked, failures


async def test_check_many_passes_the_model_test_file() -> None:
    asked, failures = await _check_many_failures(default_test_file(), load_model())
    assert failures == []
    assert asked >= 100


async def test_check_many_passes_the_generic_rewrites_file() -> None:
    model = fga_transform(GENERIC.parent / "generic.fga")
    asked, failures = await _check_many_failures(GENERIC, model)
    assert failures == []
    assert asked > 20


class CountingStore(InMemoryTupleStore):
    """Counts every lookup a forward check may make."""

    def __init__(self) -> None:
        super().__init__()
        self.queries = 0

    async def object_tuples(
        self, objects: Collection[str], users: Collection[str], relations: Collection[str]
    ) -> list[Tuple]:
        self.queries += 1
        return await super().object_tuples(objects, users, relations)

    async def contains_any(self, object: str, relation: str, users: Collection[str]) -> bool:
        self.queries += 1
        return await super().contains_any(object, relation, users)

    async def usersets(self, object: str, relation: str) -> list[str]:
        self.queries += 1
        return await super().usersets(object, relation)

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        self.queries += 1
        return await super().read(user=user, relation=relation, object=object)


async def test_check_pairs_reads_do_not_grow_with_the_mowers() -> None:
    store = CountingStore()
    authorizer = LocalAuthorizer(store)
    pairs: dict[tuple[str, str], bool] = {}
    for i in range(50):
        account, mower = uuid.uuid4(), uuid.uuid4()
        await authorizer.write([Tuple(account_object(account), "account", mower_object(mower))])
        await authorizer.write(grant_tuples(account, f"v{i}", "viewer"))
        pairs[(user_ref(f"v{i}"), mower_object(mower))] = True
        pairs[(user_ref(f"v{i - 1}"), mower_object(mower))] = False  # the previous account's
    store.queries = 0
    assert await authorizer.check_pairs(list(pairs), "can_view") == pairs
    assert store.queries <= 3


@pytest.mark.parametrize("users", [3, 300], ids=["3-users", "300-users"])
async def test_check_many_reads_do_not_grow_with_the_users(users: int) -> None:
    store = CountingStore()
    authorizer = LocalAuthorizer(store)
    account, mower = uuid.uuid4(), uuid.uuid4()
    await authorizer.write(
        [
            Tuple(account_object(account), "account", mower_object(mower)),
            Tuple(group_object("north"), "group", mower_object(mower)),
            Tuple(account_object(account), "account", group_object("north")),
        ]
    )
    roles = [("admin", None), ("viewer", None), ("viewer", "north"), ("member", None)]
    names = [f"u{i}" for i in range(users)]
    for i, name in enumerate(names):
        role, group = roles[i % len(roles)]
        if role == "member":
            await authorizer.write([Tuple(user_ref(name), "member", account_object(account))])
        else:
            await authorizer.write(grant_tuples(account, name, role, group))
    store.queries = 0
    answers = await authorizer.check_many(
        [user_ref(n) for n in names], "can_view", mower_object(mower)
    )
    assert answers == {user_ref(n): i % len(roles) != 3 for i, n in enumerate(names)}
    assert store.queries <= 3
