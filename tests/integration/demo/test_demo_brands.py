"""``mowdeck demo`` with a mixed fleet: Mowdeck, OpenMower and Automower mowers all linked."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import aiohttp
import pytest
import yarl

from mowdeck import demo
from mowdeck.demo.brands import mosquitto_binary
from mowdeck.gateway.service import GatewayService
from tests.support.eventually import eventually

pytestmark = pytest.mark.timeout(180)


def _args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-brand-tests")  # outside the checkout
    return parser.parse_args(
        ["--port", "0", "--mowers", "8", "--openmower", "2", "--automower", "2",
         "--state-dir", str(state), *extra]
    )  # fmt: skip


@pytest.mark.slow
async def test_a_mixed_fleet_is_linked_and_the_banner_says_which_is_which(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    if mosquitto_binary() is None and os.environ.get("MOWDECK_REQUIRE_MOSQUITTO") != "1":
        pytest.skip("no mosquitto binary (apt-get install mosquitto)")
    async with demo.running_demo(_args()) as running:
        [gateway] = [s for s in running.services if isinstance(s, GatewayService)]
        assert running.brands is not None
        kinds = running.brands.kinds
        assert sorted(kinds.values()) == ["automower"] * 2 + ["openmower"] * 2 + ["simulator"] * 4
        await eventually(
            lambda: (
                len(gateway.connections) == 8
                and all(c.connected for c in gateway.connections.values())
            ),
            30,
        )
        # The gateway may dial the simulator, the broker and the stand-in cloud, no more.
        broker = yarl.URL(running.brands.broker)
        cloud = yarl.URL(running.brands.automower.cloud.base)  # type: ignore[union-attr]
        assert gateway.settings.gateway_device_hosts[1:] == [
            f"{broker.host}:{broker.port}",
            f"{cloud.host}:{cloud.port}",
        ]
        text = demo.banner(running)
        assert "Mowers by brand (4 Mowdeck, 2 OpenMower, 2 Husqvarna Automower):" in text
        assert f"MQTT on {running.brands.broker}" in text
        assert f"a stand-in Automower Connect cloud on {cloud}" in text
        assert "theirs is a pause" in text
        auto_id = next(m for m, k in kinds.items() if k == "automower")
        assert f"e.g. Husqvarna Automower      {auto_id}" in text
        # Fleet's listing names each mower's kind: the console's brand column reads it.
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
            http.get(f"{running.fleet_url}/v1/mowers?limit=100") as r,
        ):
            listed = await r.json()
        assert {m["mower_id"]: m["connection"]["kind"] for m in listed["mowers"]} == kinds
        # The demo's site holds the Mowdeck mowers past the scenario's three (here one),
        # with a lawn each and a flower bed kept out, made through Fleet's API.
        assert running.site_id is not None
        in_site = [m["mower_id"] for m in listed["mowers"] if m.get("site_id")]
        assert [kinds[m] for m in in_site] == ["simulator"]
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
            http.get(f"{running.fleet_url}/v1/sites/{running.site_id}/areas") as r,
        ):
            areas = await r.json()
        assert r.status == 200, areas
        named = [(f["properties"]["name"], f["properties"]["kind"]) for f in areas["features"]]
        assert named == [("lawn 1", "work_area"), ("flower bed", "stay_out")]
        # An Automower of the demo's own cloud reports its model into Telemetry.
        auto = next(m for m, k in kinds.items() if k == "automower")
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
        ):

            async def model() -> object:
                async with http.get(f"{running.telemetry_url}/v1/mowers/{auto}/state") as r:
                    body = await r.json(content_type=None)
                return body.get("raw", {}).get("automower.model") if r.status == 200 else None

            assert await eventually(model, 20) == "Automower 450X (simulated)"
