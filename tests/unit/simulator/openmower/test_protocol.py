"""OpenMower's messages: robot_state and actions decoded, teleop's BSON both ways."""

from __future__ import annotations

import math
import struct

import pytest

from simulator.openmower.protocol import (
    ProtocolError,
    Topics,
    decode_actions,
    decode_robot_state,
    decode_teleop,
    encode_teleop,
)

# As xbot_monitoring's robot_state_callback writes it (json.dump of its fields).
ROBOT_STATE = (
    b'{"battery_percentage":0.87,"current_action_progress":0.0,"current_area":0,'
    b'"current_path":3,"current_path_index":12,"current_state":"MOWING",'
    b'"current_sub_state":"","emergency":false,"gps_percentage":0.98,"is_charging":false,'
    b'"pose":{"heading":1.2,"heading_accuracy":0.05,"heading_valid":1,"pos_accuracy":0.02,'
    b'"x":3.5,"y":-2.25},"rain_detected":false}'
)


def test_robot_state_decodes_with_every_field() -> None:
    rs = decode_robot_state(ROBOT_STATE)
    assert rs.current_state == "MOWING"
    assert rs.battery_percentage == 0.87
    assert rs.current_path_index == 12
    assert rs.pose is not None
    assert (rs.pose.x, rs.pose.y, rs.pose.heading_valid) == (3.5, -2.25, 1)


def test_an_older_robot_state_without_rain_decodes_with_defaults() -> None:
    rs = decode_robot_state(b'{"current_state":"IDLE","battery_percentage":0.5}')
    assert rs.rain_detected is False
    assert rs.pose is None


@pytest.mark.parametrize(
    "payload", [b"", b"[]", b'{"current_state": 5}'], ids=["empty", "list", "type"]
)
def test_what_is_not_a_robot_state_is_a_protocol_error(payload: bytes) -> None:
    with pytest.raises(ProtocolError, match="robot_state/json"):
        decode_robot_state(payload)


def test_actions_decode_to_enabled_flags_whether_bool_or_int() -> None:
    payload = (
        b'[{"action_id":"mower_logic:idle/start_mowing","action_name":"Start","enabled":true},'
        b'{"action_id":"mower_logic:mowing/pause","action_name":"Pause","enabled":0}]'
    )
    assert decode_actions(payload) == {
        "mower_logic:idle/start_mowing": True,
        "mower_logic:mowing/pause": False,
    }


def test_teleop_is_the_bson_document_xbot_monitoring_reads() -> None:
    encoded = encode_teleop(0.5, -1.0)
    # int32 length, then per field: 0x01, name, NUL, little-endian double; then NUL.
    expected = b"\x01vx\x00" + struct.pack("<d", 0.5) + b"\x01vz\x00" + struct.pack("<d", -1.0)
    assert encoded == struct.pack("<i", len(expected) + 5) + expected + b"\x00"
    assert decode_teleop(encoded) == {"vx": 0.5, "vz": -1.0}


def test_a_broken_teleop_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode_teleop(b"\x05\x00\x00")


def test_topics_sit_under_the_prefix() -> None:
    topics = Topics("yard/om1/")
    assert topics.robot_state == "yard/om1/robot_state/json"
    assert topics.action == "yard/om1/action"
    assert Topics().teleop == "teleop"


def test_a_null_number_is_read_as_nan_not_as_a_broken_state() -> None:
    # nlohmann::json writes NaN as null: an accuracy not known yet must not lose the state.
    rs = decode_robot_state(
        b'{"current_state":"MOWING","battery_percentage":null,'
        b'"pose":{"x":1.5,"y":2.0,"pos_accuracy":null,"heading":null}}'
    )
    assert rs.current_state == "MOWING"
    assert math.isnan(rs.battery_percentage)
    assert rs.pose is not None
    assert rs.pose.x == 1.5
    assert math.isnan(rs.pose.pos_accuracy)
