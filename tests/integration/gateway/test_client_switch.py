"""``MOWDECK_NATS_FAST_PATH`` reaches the gateway's connections in these tests, as in production.

CI runs this directory a second time with the variable set to 0; were the tests' settings
to ignore it, that run would test the fast client again, and this test would fail.
"""

from __future__ import annotations

import os

from nats.aio.client import Client as NATS

from mowdeck.kit.bus import Bus
from mowdeck.kit.wire import is_fast
from simulator import SimulatorServer
from tests.integration.gateway.conftest import running_gateway, settings_for
from tests.support.natsserver import NatsServer

# Read by hand, not through the helpers under test: "0" and "false" turn it off.
EXPECT_FAST = os.environ.get("MOWDECK_NATS_FAST_PATH", "").strip().lower() not in {"0", "false"}


def _kind(nc: object) -> str:
    if is_fast(nc):
        return "fast"
    return "stock" if type(nc) is NATS else f"other: {type(nc).__name__}"


async def test_the_gateway_and_its_lane_use_the_client_the_environment_asks_for(
    nats_server: NatsServer, sim: SimulatorServer, bus: Bus
) -> None:
    expected = "fast" if EXPECT_FAST else "stock"
    async with running_gateway(settings_for(nats_server.url, sim.registrations())) as gw:
        assert _kind(gw.parts.base.bus.nc) == expected
        assert _kind(gw.parts.lane.nc) == expected
    assert _kind(bus.nc) == expected  # the tests' own publisher too
