"""Connection kinds: declared once, read by Fleet and the gateway alike."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import msgspec
import pytest

from contracts.v1 import Connection
from mowdeck.devices import kinds as kinds_module
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.devices.kinds import (
    ENTRY_POINT_GROUP,
    SIMULATOR,
    ConnectionKind,
    ConnectionKindError,
    ConnectionKinds,
)
from mowdeck.gateway.connections import ConnectionAdapters
from mowdeck.gateway.connections.simulator import SimulatorOptions

KINDS = ConnectionKinds(
    [SIMULATOR, ConnectionKind("vendor", device_id_option="serial"), ConnectionKind("quiet")]
)


def test_the_installed_kinds_are_the_installed_adapters() -> None:
    installed = ConnectionKinds.from_entry_points()
    assert "simulator" in installed.names
    ConnectionAdapters.from_entry_points().check_declared(installed)


def test_the_simulator_kind_names_the_option_its_adapter_dials() -> None:
    assert SIMULATOR.url_option in {f.name for f in msgspec.structs.fields(SimulatorOptions)}


@pytest.mark.parametrize(
    ("connection", "key", "refused"),
    [
        (
            Connection(kind="simulator", options={"url": "ws://h:1/m"}),
            "simulator ws://h:1/m",
            False,
        ),
        (Connection(kind="simulator", options={"url": "ws://elsewhere/m"}), None, True),
        (Connection(kind="vendor", options={"serial": "A-1"}), "vendor id:A-1", False),
        (Connection(kind="quiet", options={"url": "ws://elsewhere/m"}), None, False),
    ],
    ids=["url-allowed", "url-refused", "device-id", "kind-naming-no-device"],
)
def test_the_policy_follows_each_kind(
    connection: Connection, key: str | None, refused: bool
) -> None:
    policy = KINDS.policy(DeviceHosts(["h:1"]))
    if not refused:
        assert policy.key(connection) == key
    assert (policy.refusal(connection) is not None) is refused


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("simulator", "mowdeck.devices.kinds:ENTRY_POINT_GROUP"),
        ("other", "mowdeck.devices.kinds:SIMULATOR"),
    ],
    ids=["not-a-kind", "another-name"],
)
def test_a_declaration_that_is_not_its_kind_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    declared = [EntryPoint(name, value, ENTRY_POINT_GROUP)]
    monkeypatch.setattr(kinds_module, "entry_points", lambda **_: declared)
    with pytest.raises(ConnectionKindError, match=name):
        ConnectionKinds.from_entry_points()
