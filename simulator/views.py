"""What the simulator's ``/sim`` API answers: the response models its handlers encode and
its OpenAPI document describes (``simulator/openapi.py``)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec

from contracts.v1 import Area, MowerState
from simulator.model import CommandRecord

__all__ = [
    "AreasView",
    "FaultsView",
    "FramesView",
    "Garden",
    "Health",
    "MowerDetail",
    "MowerList",
    "MowerSummary",
]


class MowerSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A simulated mower at a glance; ``faults`` are those in force, by kind."""

    mower_id: uuid.UUID
    name: str
    activity: str
    battery: float
    connected: bool
    faults: dict[str, Any]


class MowerList(msgspec.Struct, frozen=True, kw_only=True):
    """Every simulated mower."""

    count: int
    mowers: list[MowerSummary]


# A pair as an array of two (not a tuple: tuples' ``prefixItems`` trip client generators).
LatLon = Annotated[list[float], msgspec.Meta(min_length=2, max_length=2)]


class Garden(msgspec.Struct, frozen=True, kw_only=True):
    """The mower's garden: its outline and its dock, as ``[lat, lon]`` pairs."""

    polygon: list[LatLon]
    dock: LatLon


class MowerDetail(MowerSummary, frozen=True, kw_only=True):
    """A simulated mower in full: its state, garden, URL and the commands it received."""

    account_id: uuid.UUID
    url: str
    state: MowerState
    garden: Garden
    commands: list[CommandRecord]


class FramesView(msgspec.Struct, frozen=True, kw_only=True):
    """How many command frames the mower received, by command id."""

    count: int
    frames: dict[str, int]


class FaultsView(msgspec.Struct, frozen=True, kw_only=True):
    """The faults in force, by kind."""

    faults: dict[str, Any]


class AreasView(msgspec.Struct, frozen=True, kw_only=True):
    """The areas a mower knows (``simulator/areas.py``)."""

    areas: list[Area]


class Health(msgspec.Struct, frozen=True, kw_only=True):
    """The simulator is up: its mowers and the states it sent and skipped."""

    status: str
    mowers: int
    states_sent: int
    states_skipped: int
