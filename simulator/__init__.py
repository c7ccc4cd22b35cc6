"""Virtual mowers with physics and faults, their device protocol and its server."""

from simulator.clock import SimClock
from simulator.faults import (
    BatteryFault,
    ErrorFault,
    EscapeFault,
    Fault,
    LatencyFault,
    LinkLossFault,
    RejectFault,
    SilenceFault,
    StuckFault,
    TheftFault,
)
from simulator.fleet import FleetConfig, SimulatorFleet, UnknownMowerError
from simulator.garden import Garden
from simulator.model import CommandRecord, VirtualMower
from simulator.physics import Body, Params
from simulator.protocol import PROTOCOL_VERSION
from simulator.server import SimulatorServer, create_app

__all__ = [
    "PROTOCOL_VERSION",
    "BatteryFault",
    "Body",
    "CommandRecord",
    "ErrorFault",
    "EscapeFault",
    "Fault",
    "FleetConfig",
    "Garden",
    "LatencyFault",
    "LinkLossFault",
    "Params",
    "RejectFault",
    "SilenceFault",
    "SimClock",
    "SimulatorFleet",
    "SimulatorServer",
    "StuckFault",
    "TheftFault",
    "UnknownMowerError",
    "VirtualMower",
    "create_app",
]
