"""The demo's device hosts name its simulator's host and port, never the whole host."""

from __future__ import annotations

import pytest

from mowdeck.demo.addresses import device_hosts
from mowdeck.devices.endpoints import DeviceHosts


@pytest.mark.parametrize(
    ("host", "listed", "allowed", "refused"),
    [
        (
            "127.0.0.1",
            ["127.0.0.1:8090"],
            "ws://127.0.0.1:8090/mowers/m/ws",
            "ws://127.0.0.1:5432/",
        ),
        (
            "localhost",
            ["localhost:8090"],
            "ws://localhost:8090/mowers/m/ws",
            "ws://localhost:4222/",
        ),
        ("::1", ["[::1]:8090"], "ws://[::1]:8090/mowers/m/ws", "ws://[::1]:5432/"),
    ],
    ids=["ipv4", "name", "ipv6"],
)
def test_only_the_simulators_port_is_listed(
    host: str, listed: list[str], allowed: str, refused: str
) -> None:
    assert device_hosts(host, 8090) == listed
    hosts = DeviceHosts(device_hosts(host, 8090))
    assert hosts.refusal(allowed) is None
    assert hosts.refusal(refused) is not None
