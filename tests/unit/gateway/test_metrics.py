"""The gateway's metrics: accounts mostly offline, counted without an account label."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest

from contracts.v1 import Connection, MowerRegistration
from mowdeck.gateway.metrics import ACCOUNT_MIN_MOWERS, GatewayMetrics, accounts_mostly_offline


@dataclass
class Link:
    connected: bool


def _mowers(account: uuid.UUID, count: int) -> dict[uuid.UUID, MowerRegistration]:
    registrations = [
        MowerRegistration(
            mower_id=uuid.uuid4(),
            account_id=account,
            name=f"m{i}",
            connection=Connection(kind="simulator", options={"url": "ws://127.0.0.1:1/"}),
        )
        for i in range(count)
    ]
    return {r.mower_id: r for r in registrations}


def test_an_account_counts_with_half_of_its_mowers_offline() -> None:
    site, other, small = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    mowers = {**_mowers(site, 4), **_mowers(other, 4), **_mowers(small, ACCOUNT_MIN_MOWERS - 1)}
    links: dict[uuid.UUID, Link] = {m: Link(connected=True) for m in mowers}
    assert accounts_mostly_offline(mowers, links) == 0
    site_mowers = [m for m, r in mowers.items() if r.account_id == site]
    other_mowers = [m for m, r in mowers.items() if r.account_id == other]
    links[site_mowers[0]].connected = False
    assert accounts_mostly_offline(mowers, links) == 0  # one mower: its own problem
    del links[site_mowers[1]]  # no link at all counts as offline too
    assert accounts_mostly_offline(mowers, links) == 1
    links[other_mowers[0]].connected = False
    assert accounts_mostly_offline(mowers, links) == 1
    for m, r in mowers.items():  # too few mowers to tell a site from a mower
        if r.account_id == small:
            links[m].connected = False
    assert accounts_mostly_offline(mowers, links) == 1


def test_no_series_of_the_gateway_names_an_account_mower_or_command() -> None:
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    mowers = _mowers(uuid.uuid4(), 3)
    metrics.accounts_offline.set_function(lambda: accounts_mostly_offline(mowers, {}))
    text = generate_latest(registry).decode()
    assert "mowdeck_gateway_accounts_mostly_offline 1.0" in text
    assert 'mowdeck_gateway_commands_refused_total{reason="unknown_mower"} 0.0' in text
    for label in ("account", "mower", "command_id", "user"):
        assert f'{label}="' not in text and f'{label}_id="' not in text
