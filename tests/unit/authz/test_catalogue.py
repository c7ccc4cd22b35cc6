"""The permission catalogue: implications, roles, and the model relations it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mowdeck.authz
from mowdeck.authz.catalogue import PERMISSIONS, implied_keys, role_keys


def test_mower_view_implies_telemetry_view() -> None:
    assert implied_keys(["mower.view"]) == {"mower.view", "telemetry.view"}


def test_roles_give_their_key_and_everything_it_implies() -> None:
    assert role_keys("viewer") == {"mower.view", "telemetry.view"}
    assert role_keys("operator") == {"mower.operate", "mower.view", "telemetry.view"}
    assert role_keys("admin") == set(PERMISSIONS)


def test_unknown_keys_and_roles_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown permission key"):
        implied_keys(["mower.fly"])
    with pytest.raises(ValueError, match="role must be one of"):
        role_keys("owner")


def test_every_key_names_an_account_relation_of_the_model() -> None:
    model = (Path(mowdeck.authz.__file__).parent / "model.fga").read_text()
    account = model.split("type account", 1)[1].split("\ntype ", 1)[0]
    relations = set(re.findall(r"define (\w+):", account))
    assert {p.relation for p in PERMISSIONS.values()} <= relations
    for permission in PERMISSIONS.values():
        assert set(permission.implies) <= set(PERMISSIONS)
