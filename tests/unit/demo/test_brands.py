"""The demo's mixed fleet: how many of each brand, in which positions, reached where."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from contracts.v1 import Connection, MowerRegistration
from mowdeck.demo.brands import Brands, brand_counts, plan_brands


@pytest.mark.parametrize(
    ("total", "asked", "counts"),
    [
        (20, (None, None), (3, 3)),
        (10, (None, None), (3, 3)),
        (9, (None, None), (0, 0)),
        (4, (1, None), (1, 0)),
        (20, (0, 5), (0, 5)),
    ],
    ids=["default-20", "default-10", "small-all-own", "asked-one", "asked-none-and-five"],
)
def test_a_fleet_of_ten_or_more_is_mixed_unless_told_otherwise(
    total: int, asked: tuple[int | None, int | None], counts: tuple[int, int]
) -> None:
    assert brand_counts(total, *asked) == counts


@pytest.mark.parametrize(
    ("total", "openmower", "automower", "plan"),
    [
        (20, 3, 3, (range(14), range(14, 17), range(17, 20))),
        (4, 3, 3, (range(0), range(1), range(1, 4))),
        (5, 0, 0, (range(5), range(5, 5), range(5, 5))),
        (5, -1, 9, (range(0), range(0), range(5))),
    ],
    ids=["14-3-3", "more-asked-than-mowers", "all-own", "clamped"],
)
def test_mowdeck_s_own_mowers_come_first(
    total: int, openmower: int, automower: int, plan: tuple[range, range, range]
) -> None:
    assert plan_brands(total, openmower, automower) == plan


def test_the_broker_and_the_cloud_are_the_only_hosts_added(tmp_path: Path) -> None:
    b = Brands(host="127.0.0.1", state_dir=tmp_path, broker="mqtt://127.0.0.1:1884")
    assert b.device_hosts() == ["127.0.0.1:1884"]
    assert b.gateway_settings() == {}
    b.cloud_port = 8091
    assert b.device_hosts() == ["127.0.0.1:1884", "127.0.0.1:8091"]
    assert b.gateway_settings() == {
        "automower_token_url": "http://127.0.0.1:8091/auth/v1/oauth2/token",
        "automower_api_url": "http://127.0.0.1:8091/api/v1",
        "automower_ws_url": "ws://127.0.0.1:8091/ws/v1",
        "gateway_credentials_dir": str(tmp_path / "credentials"),
    }


def test_the_counts_name_each_brand(tmp_path: Path) -> None:
    b = Brands(host="127.0.0.1", state_dir=tmp_path)
    regs = [
        MowerRegistration(
            mower_id=uuid.uuid4(),
            account_id=uuid.uuid4(),
            name=kind,
            connection=Connection(kind=kind, options={}),
        )
        for kind in ("simulator", "simulator", "automower")
    ]
    assert b.registrations(regs) == regs
    assert b.counts() == {"Mowdeck": 2, "Husqvarna Automower": 1}
