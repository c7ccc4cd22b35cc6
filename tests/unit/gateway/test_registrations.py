"""Registrations no connection adapter takes are refused, counted and skipped."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from contracts.v1 import Connection, MowerRegistration
from mowdeck.gateway.connections import ConnectionAdapters
from mowdeck.gateway.connections.endpoints import DeviceHosts
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mowers import ShardMowers
from mowdeck.gateway.registrations import ShardRegistrations


class FakeConnection:
    url_option = "url"

    def __init__(self, registration: MowerRegistration, events: Any, **_: Any) -> None:
        if "url" not in registration.connection.options:
            raise ConnectionError("invalid options: url missing")
        self.opened = self.closed = False

    async def open(self) -> None:
        self.opened = True

    async def close(self) -> None:
        self.closed = True


class FakeControllers:
    """Stands in for the router and the closing: records what was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, uuid.UUID]] = []

    async def start(self, mower_id: uuid.UUID) -> None:
        self.calls.append(("start", mower_id))

    async def stop(self, mower_id: uuid.UUID) -> None:
        self.calls.append(("stop", mower_id))

    async def close(self, mower_id: uuid.UUID, reason: str) -> None:
        self.calls.append(("close", mower_id))

    def tell(self, mower_id: uuid.UUID, message: object) -> None:
        self.calls.append(("tell", mower_id))


def mower(n: int, kind: str = "fake", **options: Any) -> MowerRegistration:
    return MowerRegistration(
        mower_id=uuid.UUID(int=n),
        account_id=uuid.UUID(int=99),
        name="m",
        connection=Connection(kind=kind, options=options),
    )


@pytest.mark.parametrize(
    ("refused", "reason"),
    [
        (mower(2, kind="nope", url="ws://a"), "unknown_kind"),
        (mower(2), "invalid"),
        (mower(2, url="ws://10.0.0.1:5432"), "endpoint_not_allowed"),
        (mower(2, url="ws://c:5432"), "endpoint_not_allowed"),
    ],
    ids=["unknown-kind", "invalid-options", "address-not-allowed", "port-not-allowed"],
)
async def test_a_refused_registration_is_counted_and_skipped(
    refused: MowerRegistration, reason: str
) -> None:
    registry = CollectorRegistry()
    controllers = FakeControllers()
    registrations = ShardRegistrations(
        ShardMowers(0, 1),
        controllers,  # type: ignore[arg-type]
        controllers,  # type: ignore[arg-type]
        adapters=ConnectionAdapters({"fake": FakeConnection}),  # type: ignore[dict-item]
        metrics=GatewayMetrics(registry),
        connections={},
        device_hosts=DeviceHosts(["a", "c:80"]),
    )
    await registrations.apply(mower(1, url="ws://a"))
    await registrations.apply(refused)
    await registrations.apply(mower(3, url="ws://c"))
    assert set(registrations.mowers) == {uuid.UUID(int=1), uuid.UUID(int=3)}
    assert set(registrations.connections) == {uuid.UUID(int=1), uuid.UUID(int=3)}
    count = registry.get_sample_value(
        "mowdeck_gateway_registrations_refused_total", {"reason": reason}
    )
    assert count == 1
    # A known mower whose connection changes to one no adapter takes is removed.
    link = registrations.connections[uuid.UUID(int=1)]
    await registrations.apply(mower(1, kind="fake"))
    assert uuid.UUID(int=1) not in registrations.mowers
    assert link.closed  # type: ignore[attr-defined]
    assert ("stop", uuid.UUID(int=1)) in controllers.calls
