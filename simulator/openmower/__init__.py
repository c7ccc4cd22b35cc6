"""OpenMower's MQTT interface: its messages (``protocol``) and a stand-in mower (``standin``).

The gateway's ``openmower`` adapter reads the messages through ``protocol``; tests and
``mowdeck sim --protocol openmower`` run ``standin`` mowers against a real broker.
"""

from simulator.openmower.fleet import OpenMowerFleet
from simulator.openmower.protocol import (
    ACTION_ABORT_DOCKING,
    ACTION_ABORT_MOWING,
    ACTION_CONTINUE,
    ACTION_PAUSE,
    ACTION_START,
    Action,
    Pose,
    RobotState,
    Topics,
    decode_actions,
    decode_robot_state,
    decode_teleop,
    encode_teleop,
)
from simulator.openmower.standin import StandInOpenMower

__all__ = [
    "ACTION_ABORT_DOCKING",
    "ACTION_ABORT_MOWING",
    "ACTION_CONTINUE",
    "ACTION_PAUSE",
    "ACTION_START",
    "Action",
    "OpenMowerFleet",
    "Pose",
    "RobotState",
    "StandInOpenMower",
    "Topics",
    "decode_actions",
    "decode_robot_state",
    "decode_teleop",
    "encode_teleop",
]
