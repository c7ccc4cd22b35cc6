"""The in-process evaluator: the authorization matrix, grants and revocations, validation."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass

import pytest

from mowdeck.authz import (
    AuthzError,
    InMemoryTupleStore,
    InvalidTupleError,
    LocalAuthorizer,
    Tuple,
    account_object,
    grant_tuples,
    group_object,
    mower_object,
    revoke_tuples,
    user_ref,
)

ACCOUNT = uuid.UUID("0000000a-0000-4000-8000-00000000000a")
OTHER = uuid.UUID("0000000b-0000-4000-8000-00000000000b")
M_PLAIN = uuid.UUID("a1000000-0000-4000-8000-000000000001")
M_NORTH = uuid.UUID("a2000000-0000-4000-8000-000000000002")
M_OTHER = uuid.UUID("b1000000-0000-4000-8000-000000000001")


def mower_tuples(mower: uuid.UUID, account: uuid.UUID, group: str | None = None) -> list[Tuple]:
    """What Fleet writes on registration."""
    tuples = [Tuple(account_object(account), "account", mower_object(mower))]
    if group:
        tuples.append(Tuple(group_object(group), "group", mower_object(mower)))
    return tuples


async def fleet() -> LocalAuthorizer:
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    await authorizer.write(
        [
            *mower_tuples(M_PLAIN, ACCOUNT),
            *mower_tuples(M_NORTH, ACCOUNT, "north"),
            *mower_tuples(M_OTHER, OTHER),
        ]
    )
    return authorizer


@dataclass(frozen=True)
class Grant:
    account: uuid.UUID
    role: str
    group: str | None = None


# who: their grants; per mower: (can_view, can_operate, can_admin)
MATRIX = [
    ("owner", [Grant(ACCOUNT, "admin")], {M_PLAIN: "voa", M_NORTH: "voa", M_OTHER: ""}),
    ("account-operator", [Grant(ACCOUNT, "operator")], {M_PLAIN: "vo", M_NORTH: "vo", M_OTHER: ""}),
    ("account-viewer", [Grant(ACCOUNT, "viewer")], {M_PLAIN: "v", M_NORTH: "v", M_OTHER: ""}),
    ("group-viewer", [Grant(ACCOUNT, "viewer", "north")], {M_PLAIN: "", M_NORTH: "v", M_OTHER: ""}),
    (
        "group-operator",
        [Grant(ACCOUNT, "operator", "north")],
        {M_PLAIN: "", M_NORTH: "vo", M_OTHER: ""},
    ),
    ("other-account", [Grant(OTHER, "admin")], {M_PLAIN: "", M_NORTH: "", M_OTHER: "voa"}),
    ("no-grant", [], {M_PLAIN: "", M_NORTH: "", M_OTHER: ""}),
]
RELATIONS = {"v": "can_view", "o": "can_operate", "a": "can_admin"}


@pytest.mark.parametrize(("who", "grants", "expected"), MATRIX, ids=[m[0] for m in MATRIX])
async def test_authorization_matrix(
    who: str, grants: list[Grant], expected: dict[uuid.UUID, str]
) -> None:
    authorizer = await fleet()
    for g in grants:
        await authorizer.write(grant_tuples(g.account, who, g.role, g.group))
    for mower, letters in expected.items():
        for letter, relation in RELATIONS.items():
            allowed = await authorizer.check(user_ref(who), relation, mower_object(mower))
            assert allowed == (letter in letters), (who, relation, mower)
    for letter, relation in RELATIONS.items():
        visible = await authorizer.list_objects(user_ref(who), relation, "mower")
        assert visible == {mower_object(m) for m, ls in expected.items() if letter in ls}


@pytest.mark.parametrize(
    ("role", "group"),
    [
        ("admin", None),
        ("operator", None),
        ("viewer", None),
        ("viewer", "north"),
        ("operator", "north"),
    ],
    ids=["admin", "operator", "viewer", "group-viewer", "group-operator"],
)
async def test_revoked_grant_sees_nothing(role: str, group: str | None) -> None:
    authorizer = await fleet()
    await authorizer.write(grant_tuples(ACCOUNT, "rita", role, group))
    assert await authorizer.check(user_ref("rita"), "can_view", mower_object(M_NORTH))
    await authorizer.write((), revoke_tuples(ACCOUNT, "rita", role, group))
    assert not await authorizer.check(user_ref("rita"), "can_view", mower_object(M_NORTH))
    assert await authorizer.list_objects(user_ref("rita"), "can_view", "mower") == set()
    # Membership stays: it grants no mower on its own.
    assert await authorizer.check(user_ref("rita"), "member", account_object(ACCOUNT))


async def test_check_many_answers_every_user() -> None:
    authorizer = await fleet()
    await authorizer.write(grant_tuples(ACCOUNT, "vera", "viewer"))
    await authorizer.write(grant_tuples(ACCOUNT, "gina", "viewer", "north"))
    answers = await authorizer.check_many(
        [user_ref("vera"), user_ref("gina"), user_ref("bob")], "can_view", mower_object(M_PLAIN)
    )
    assert answers == {user_ref("vera"): True, user_ref("gina"): False, user_ref("bob"): False}


async def test_removed_mower_is_visible_to_nobody() -> None:
    authorizer = await fleet()
    await authorizer.write(grant_tuples(ACCOUNT, "olga", "admin"))
    assert await authorizer.delete_object(mower_object(M_NORTH)) == 2
    assert not await authorizer.check(user_ref("olga"), "can_view", mower_object(M_NORTH))
    assert await authorizer.read(object=mower_object(M_NORTH)) == []
    assert await authorizer.list_objects(user_ref("olga"), "can_view", "mower") == {
        mower_object(M_PLAIN)
    }


INVALID_WRITES = [
    ("unknown-type", Tuple("user:a", "admin", "planet:x")),
    ("unknown-relation", Tuple("user:a", "owner", account_object(ACCOUNT))),
    ("computed-relation", Tuple("user:a", "can_view", mower_object(M_PLAIN))),
    ("wrong-user-type", Tuple("group:g", "admin", account_object(ACCOUNT))),
    ("userset-not-allowed", Tuple("group:g#viewer", "viewer", account_object(ACCOUNT))),
    ("wildcard-not-allowed", Tuple("user:*", "viewer", account_object(ACCOUNT))),
    ("object-without-id", Tuple("user:a", "admin", "account:")),
    ("object-is-userset", Tuple("user:a", "admin", "account:x#member")),
    ("user-without-type", Tuple("anne", "admin", account_object(ACCOUNT))),
]


@pytest.mark.parametrize("bad", [w[1] for w in INVALID_WRITES], ids=[w[0] for w in INVALID_WRITES])
async def test_write_refuses_what_the_model_refuses(bad: Tuple) -> None:
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    with pytest.raises(InvalidTupleError):
        await authorizer.write([bad])
    assert await authorizer.read() == []


@pytest.mark.parametrize(
    ("user", "relation", "obj"),
    [
        ("user:a", "can_fly", mower_object(M_PLAIN)),
        ("user:a", "can_view", "mower"),
        ("nobody", "can_view", mower_object(M_PLAIN)),
    ],
    ids=["unknown-relation", "object-without-id", "user-without-type"],
)
async def test_check_refuses_malformed_questions(user: str, relation: str, obj: str) -> None:
    with pytest.raises(InvalidTupleError):
        await LocalAuthorizer(InMemoryTupleStore()).check(user, relation, obj)


async def test_write_twice_and_delete_missing_are_no_ops() -> None:
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    tuples = grant_tuples(ACCOUNT, "olga", "admin")
    await authorizer.write(tuples)
    await authorizer.write(tuples)
    await authorizer.write((), [Tuple("user:nobody", "admin", account_object(ACCOUNT))])
    assert sorted(await authorizer.read()) == sorted(tuples)


async def test_write_and_delete_of_one_tuple_at_once_is_refused() -> None:
    authorizer = LocalAuthorizer(InMemoryTupleStore())
    t = Tuple(user_ref("a"), "admin", account_object(ACCOUNT))
    with pytest.raises(InvalidTupleError):
        await authorizer.write([t], [t])


class CountingStore(InMemoryTupleStore):
    """Counts the store's queries, to show list_objects does not grow with the fleet."""

    def __init__(self) -> None:
        super().__init__()
        self.queries = 0

    async def objects_with(self, type: str, relation: str, users: Collection[str]) -> set[str]:
        self.queries += 1
        return await super().objects_with(type, relation, users)

    async def contains_any(self, object: str, relation: str, users: Collection[str]) -> bool:
        self.queries += 1
        return await super().contains_any(object, relation, users)

    async def read(
        self, *, user: str | None = None, relation: str | None = None, object: str | None = None
    ) -> list[Tuple]:
        self.queries += 1
        return await super().read(user=user, relation=relation, object=object)


@pytest.mark.parametrize("fleet_size", [10, 3000], ids=["10-mowers", "3000-mowers"])
async def test_list_objects_cost_does_not_grow_with_the_fleet(fleet_size: int) -> None:
    store = CountingStore()
    authorizer = LocalAuthorizer(store)
    mowers = [uuid.UUID(int=i + 1) for i in range(fleet_size)]
    tuples: list[Tuple] = []
    for i, m in enumerate(mowers):
        tuples += mower_tuples(m, ACCOUNT, "north" if i % 2 else None)
    await authorizer.write(tuples)
    await authorizer.write(grant_tuples(ACCOUNT, "gina", "viewer", "north"))
    await authorizer.write(grant_tuples(ACCOUNT, "vera", "viewer"))
    store.queries = 0
    visible = await authorizer.list_objects(user_ref("gina"), "can_view", "mower")
    assert visible == {mower_object(m) for i, m in enumerate(mowers) if i % 2}
    assert len(await authorizer.list_objects(user_ref("vera"), "can_view", "mower")) == fleet_size
    assert store.queries <= 40


async def test_too_deep_resolution_is_an_error() -> None:
    from mowdeck.authz import AuthorizationModel  # noqa: PLC0415

    chain = {f"r{i}": {"computedUserset": {"relation": f"r{i + 1}"}} for i in range(30)}
    chain["r30"] = {"this": {}}
    meta = {"r30": {"directly_related_user_types": [{"type": "user"}]}}
    model = AuthorizationModel(
        {
            "type_definitions": [
                {"type": "user"},
                {"type": "doc", "relations": chain, "metadata": {"relations": meta}},
            ]
        }
    )
    with pytest.raises(AuthzError, match="depth"):
        await LocalAuthorizer(InMemoryTupleStore(), model).check("user:a", "r0", "doc:d")


def test_refs() -> None:
    assert user_ref("u1") == "user:u1"
    assert account_object(ACCOUNT) == f"account:{ACCOUNT}"
    assert mower_object(M_PLAIN) == f"mower:{M_PLAIN}"
    assert group_object("north") == "group:north"
