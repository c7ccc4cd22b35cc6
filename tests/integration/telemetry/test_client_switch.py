"""``MOWDECK_NATS_FAST_PATH`` reaches Telemetry's connection in these tests, as in production.

CI runs this directory a second time with the variable set to 0; were the tests' settings
to ignore it, that run would test the fast client again, and this test would fail.
"""

from __future__ import annotations

import os

from nats.aio.client import Client as NATS

from mowdeck.kit.bus import Bus
from mowdeck.kit.wire import is_fast
from tests.integration.telemetry.conftest import ServiceFactory

# Read by hand, not through the helpers under test: "0" and "false" turn it off.
EXPECT_FAST = os.environ.get("MOWDECK_NATS_FAST_PATH", "").strip().lower() not in {"0", "false"}


def _kind(nc: object) -> str:
    if is_fast(nc):
        return "fast"
    return "stock" if type(nc) is NATS else f"other: {type(nc).__name__}"


async def test_telemetry_uses_the_client_the_environment_asks_for(
    make_service: ServiceFactory, bus: Bus
) -> None:
    expected = "fast" if EXPECT_FAST else "stock"
    service = await make_service()
    assert _kind(service.parts.base.bus.nc) == expected
    assert _kind(bus.nc) == expected  # the tests' own publisher too
