"""OpenMower's MQTT interface: its messages, a stand-in mower and the simulator's bridge.

The gateway's ``openmower`` adapter reads the messages through ``protocol``; tests run
``standin`` mowers against a real broker; ``bridge`` makes the simulator's virtual mowers
speak OpenMower (``mowdeck sim --protocol openmower``).
"""

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
    "Pose",
    "RobotState",
    "StandInOpenMower",
    "Topics",
    "decode_actions",
    "decode_robot_state",
    "decode_teleop",
    "encode_teleop",
]
