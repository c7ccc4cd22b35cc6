"""Registrations no connection adapter takes are refused, counted and skipped."""

from __future__ import annotations

import collections
import uuid
from typing import Any, ClassVar

import pytest
from prometheus_client import CollectorRegistry

from contracts.v1 import Connection, MowerRegistration
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.devices.kinds import OPENMOWER, ConnectionKind, ConnectionKinds
from mowdeck.gateway.connections import (
    ConnectionAdapters,
    ConnectionDeps,
    UndeclaredConnectionKindError,
)
from mowdeck.gateway.metrics import GatewayMetrics
from mowdeck.gateway.mowers import ShardMowers
from mowdeck.gateway.registrations import ShardRegistrations

# The kind of the fake links: its URL is in option "url".
FAKE = ConnectionKinds([ConnectionKind("fake", url_option="url")])


class FakeConnection:
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
        endpoints=FAKE.policy(DeviceHosts(["a", "c:80"])),
        deps=ConnectionDeps(DeviceHosts(["a", "c:80"])),
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


class CountingLink:
    """A fake link that counts the links open per URL (as written: the test spells them)."""

    open_by_device: ClassVar[collections.Counter[str]] = collections.Counter()
    most: ClassVar[int] = 0

    def __init__(self, registration: MowerRegistration, events: Any, **_: Any) -> None:
        self.device = str(registration.connection.options["device"])
        self.is_open = False

    async def open(self) -> None:
        self.is_open = True
        CountingLink.open_by_device[self.device] += 1
        CountingLink.most = max(CountingLink.most, CountingLink.open_by_device[self.device])

    async def close(self) -> None:
        if self.is_open:
            self.is_open = False
            CountingLink.open_by_device[self.device] -= 1


def linked(n: int, url: str, device: str) -> MowerRegistration:
    return mower(n, kind="fake", url=url, device=device)


async def test_one_device_has_one_link_and_waiting_registrations_take_it_in_turn() -> None:
    registry = CollectorRegistry()
    CountingLink.open_by_device.clear()
    CountingLink.most = 0
    registrations = ShardRegistrations(
        ShardMowers(0, 1),
        FakeControllers(),  # type: ignore[arg-type]
        FakeControllers(),  # type: ignore[arg-type]
        adapters=ConnectionAdapters({"fake": CountingLink}),  # type: ignore[dict-item]
        metrics=GatewayMetrics(registry),
        connections={},
        endpoints=FAKE.policy(DeviceHosts(["h"])),
        deps=ConnectionDeps(DeviceHosts(["h"])),
    )

    def refused() -> float | None:
        labels = {"reason": "endpoint_taken"}
        return registry.get_sample_value("mowdeck_gateway_registrations_refused_total", labels)

    def waiting() -> float | None:
        return registry.get_sample_value("mowdeck_gateway_registrations_waiting")

    x = "ws://h/mowers/abcdef00-0000-4000-8000-000000000001/ws"
    await registrations.apply(linked(1, x, "X"))
    # The same device written two other ways: both refused, both wait, in that order.
    await registrations.apply(linked(2, x.replace("ws://h/", "WS://H.:80/"), "X"))
    await registrations.apply(linked(3, x.replace("abcdef00", "ABCDEF00"), "X"))
    assert set(registrations.connections) == {uuid.UUID(int=1)}
    assert (refused(), waiting()) == (2, 2)
    # The holder moves elsewhere: the first waiting takes the device once its link closed.
    await registrations.apply(linked(1, "ws://h/elsewhere", "Y"))
    assert set(registrations.connections) == {uuid.UUID(int=1), uuid.UUID(int=2)}
    assert waiting() == 1
    # The second waiting one changes its mind, to a free device: linked at once.
    await registrations.apply(linked(3, "ws://h/third", "Z"))
    assert uuid.UUID(int=3) in registrations.connections
    assert waiting() == 0
    # Removing the holder frees the device; nobody waits for it any more.
    await registrations.remove(uuid.UUID(int=2))
    await registrations.apply(linked(4, x, "X"))
    assert uuid.UUID(int=4) in registrations.connections
    assert CountingLink.most == 1  # never two links to one device at a time
    assert refused() == 2


async def test_a_waiting_registration_that_is_removed_never_links() -> None:
    registry = CollectorRegistry()
    registrations = ShardRegistrations(
        ShardMowers(0, 1),
        FakeControllers(),  # type: ignore[arg-type]
        FakeControllers(),  # type: ignore[arg-type]
        adapters=ConnectionAdapters({"fake": CountingLink}),  # type: ignore[dict-item]
        metrics=GatewayMetrics(registry),
        connections={},
        endpoints=FAKE.policy(DeviceHosts(["h"])),
        deps=ConnectionDeps(DeviceHosts(["h"])),
    )
    await registrations.apply(linked(1, "ws://h/x", "X"))
    await registrations.apply(linked(2, "ws://h/x", "X"))
    await registrations.remove(uuid.UUID(int=2))
    await registrations.remove(uuid.UUID(int=1))
    assert registrations.connections == {}
    assert registry.get_sample_value("mowdeck_gateway_registrations_waiting") == 0


def test_an_adapter_of_a_kind_nobody_declared_is_refused() -> None:
    # Its URL option is unknown, so the device hosts could not be checked for it.
    adapters = ConnectionAdapters({"fake": FakeConnection, "stray": FakeConnection})  # type: ignore[dict-item]
    with pytest.raises(UndeclaredConnectionKindError, match="stray"):
        adapters.check_declared(FAKE)
    ConnectionAdapters({"fake": FakeConnection}).check_declared(FAKE)  # type: ignore[dict-item]


async def test_options_a_kind_declares_malformed_are_refused_as_invalid() -> None:
    registry = CollectorRegistry()
    controllers = FakeControllers()
    hosts = DeviceHosts(["a"])
    registrations = ShardRegistrations(
        ShardMowers(0, 1),
        controllers,  # type: ignore[arg-type]
        controllers,  # type: ignore[arg-type]
        adapters=ConnectionAdapters({"openmower": CountingLink}),  # type: ignore[dict-item]
        metrics=GatewayMetrics(registry),
        connections={},
        endpoints=ConnectionKinds([OPENMOWER]).policy(hosts),
        deps=ConnectionDeps(hosts),
    )
    # Stored before Fleet checked the kind's options: a datum off the globe.
    bad = mower(7, kind="openmower", broker="mqtt://a:1883", datum={"lat": 99, "lon": 0})
    await registrations.apply(bad)
    assert uuid.UUID(int=7) not in registrations.mowers
    refused = registry.get_sample_value(
        "mowdeck_gateway_registrations_refused_total", {"reason": "invalid"}
    )
    assert refused == 1
