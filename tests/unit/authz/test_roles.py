"""Roles as tuples (what ``mowdeck grant`` writes and deletes)."""

from __future__ import annotations

import uuid

import pytest

from mowdeck.authz import Tuple, grant_tuples, revoke_tuples

A = uuid.UUID("0000000a-0000-4000-8000-00000000000a")
ACC = f"account:{A}"

GRANTS = [
    ("admin", None, [Tuple("user:u", "admin", ACC), Tuple("user:u", "member", ACC)]),
    ("viewer", None, [Tuple("user:u", "viewer", ACC), Tuple("user:u", "member", ACC)]),
    (
        "operator",
        "g1",
        [
            Tuple(ACC, "account", "group:g1"),
            Tuple("user:u", "operator", "group:g1"),
            Tuple("user:u", "member", ACC),
        ],
    ),
]


@pytest.mark.parametrize(
    ("role", "group", "expected"), GRANTS, ids=["account-admin", "account-viewer", "group-op"]
)
def test_grant_tuples(role: str, group: str | None, expected: list[Tuple]) -> None:
    assert grant_tuples(A, "u", role, group) == expected


@pytest.mark.parametrize(
    ("role", "group", "expected"),
    [
        ("admin", None, [Tuple("user:u", "admin", ACC)]),
        ("viewer", "g1", [Tuple("user:u", "viewer", "group:g1")]),
    ],
    ids=["account-admin", "group-viewer"],
)
def test_revoke_tuples_keep_membership(role: str, group: str | None, expected: list[Tuple]) -> None:
    assert revoke_tuples(A, "u", role, group) == expected


@pytest.mark.parametrize(
    ("role", "group"), [("owner", None), ("admin", "g1")], ids=["unknown-role", "group-admin"]
)
def test_refused_roles(role: str, group: str | None) -> None:
    with pytest.raises(ValueError, match="role"):
        grant_tuples(A, "u", role, group)


S = uuid.UUID("5a000000-0000-4000-8000-00000000005a")


def test_a_site_role_is_the_role_on_the_site_and_membership_of_the_account() -> None:
    assert grant_tuples(A, "u", "viewer", site_id=S) == [
        Tuple("user:u", "viewer", f"site:{S}"),
        Tuple("user:u", "member", ACC),
    ]
    assert revoke_tuples(A, "u", "operator", site_id=S) == [
        Tuple("user:u", "operator", f"site:{S}")
    ]


@pytest.mark.parametrize(
    ("role", "group", "match"),
    [("admin", None, "a site role"), ("viewer", "g1", "not both")],
    ids=["site-admin", "group-and-site"],
)
def test_refused_site_grants(role: str, group: str | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        grant_tuples(A, "u", role, group, S)
