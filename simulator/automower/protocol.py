"""Husqvarna's Automower Connect API as JSON: what the gateway reads and the stand-in writes.

The shapes follow the vendor's REST API (``GET /mowers``: JSON:API ``data[]`` of
``{type: "mower", id, attributes}``) and its WebSocket's ``*-event-v2`` messages (one
part of a mower's attributes each), as the aioautomower client reads them (MIT; the test
fixtures under tests/fixtures/automower/ are its). Only the parts Mowdeck maps are typed;
the rest of a mower's attributes is ignored.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "ACTION_PARK_UNTIL_FURTHER_NOTICE",
    "ACTION_PARK_UNTIL_NEXT_SCHEDULE",
    "ACTION_PAUSE",
    "ACTION_RESUME_SCHEDULE",
    "ACTION_START",
    "ACTION_START_IN_WORK_AREA",
    "ERROR_STATES",
    "Battery",
    "Capabilities",
    "Event",
    "Metadata",
    "MowerAttributes",
    "MowerPart",
    "Planner",
    "PlannerOverride",
    "Point",
    "ProtocolError",
    "Settings",
    "Snapshot",
    "System",
    "WorkArea",
    "decode_event",
    "decode_snapshot",
]

ACTION_START = "Start"
ACTION_START_IN_WORK_AREA = "StartInWorkArea"
ACTION_PAUSE = "Pause"
ACTION_RESUME_SCHEDULE = "ResumeSchedule"
ACTION_PARK_UNTIL_NEXT_SCHEDULE = "ParkUntilNextSchedule"
ACTION_PARK_UNTIL_FURTHER_NOTICE = "ParkUntilFurtherNotice"
ERROR_STATES = frozenset({"ERROR", "FATAL_ERROR", "ERROR_AT_POWER_UP"})


class ProtocolError(ValueError):
    """A message that is not the API's."""


class _Wire(msgspec.Struct, frozen=True, rename="camel"):
    pass


class MowerPart(_Wire, frozen=True):
    """``attributes.mower``."""

    mode: str = "UNKNOWN"
    activity: str = "UNKNOWN"
    state: str = "UNKNOWN"
    inactive_reason: str = "NONE"
    error_code: int = 0
    error_code_timestamp: int = 0
    is_error_confirmable: bool | None = None
    work_area_id: int | str | None = None


class Battery(_Wire, frozen=True):
    battery_percent: int = 0
    remaining_charging_time: int | None = None


class PlannerOverride(_Wire, frozen=True):
    action: str = "NOT_ACTIVE"


class Planner(_Wire, frozen=True):
    next_start_timestamp: int = 0
    override: PlannerOverride = PlannerOverride()
    restricted_reason: str = "NONE"
    external_reason: int | None = None


class Metadata(_Wire, frozen=True):
    connected: bool = False
    status_timestamp: int = 0


class Settings(_Wire, frozen=True):
    cutting_height: int | None = None


class System(_Wire, frozen=True):
    """``attributes.system``: the mower's name and model as its owner knows them."""

    name: str = ""
    model: str = ""
    serial_number: int | str | None = None


class Capabilities(_Wire, frozen=True):
    """``attributes.capabilities``: what the model offers (absent: nothing of it)."""

    work_areas: bool = False
    position: bool = False
    headlights: bool = False
    stay_out_zones: bool = False
    can_confirm_error: bool = False


class WorkArea(_Wire, frozen=True):
    """One of ``attributes.workAreas`` (id 0 with an empty name: the main area)."""

    work_area_id: int
    name: str = ""
    enabled: bool = True


class Point(_Wire, frozen=True):
    latitude: float
    longitude: float


class MowerAttributes(_Wire, frozen=True):
    """What Mowdeck reads of a mower's attributes (REST) or keeps of its events."""

    system: System = System()
    capabilities: Capabilities = Capabilities()
    mower: MowerPart = MowerPart()
    battery: Battery = Battery()
    planner: Planner = Planner()
    metadata: Metadata = Metadata()
    settings: Settings = Settings()
    positions: list[Point] = msgspec.field(default_factory=list)  # newest first
    work_areas: list[WorkArea] = msgspec.field(default_factory=list)


class _Mower(_Wire, frozen=True):
    id: str
    attributes: MowerAttributes
    type: str = "mower"


class Snapshot(_Wire, frozen=True):
    """``GET /mowers``."""

    data: list[_Mower]

    def by_id(self) -> dict[str, MowerAttributes]:
        """Each mower's attributes by its id."""
        return {m.id: m.attributes for m in self.data if m.type == "mower"}


class _CuttingHeight(_Wire, frozen=True):
    height: int


class _EventAttributes(_Wire, frozen=True):
    mower: MowerPart | None = None
    battery: Battery | None = None
    planner: Planner | None = None
    position: Point | None = None
    cutting_height: _CuttingHeight | None = None


class Event(_Wire, frozen=True):
    """One WebSocket ``*-event-v2`` message."""

    id: str
    type: str
    attributes: _EventAttributes = _EventAttributes()

    def merged(self, onto: MowerAttributes) -> MowerAttributes:
        """``onto`` with what this event reports replacing its part (an event that
        reports the mower at all also says the cloud hears it: ``connected``)."""
        a = self.attributes
        changes: dict[str, object] = {}
        if a.mower is not None:
            changes["mower"] = a.mower
        if a.battery is not None:
            changes["battery"] = a.battery
        if a.planner is not None:
            changes["planner"] = a.planner
        if a.position is not None:
            changes["positions"] = [a.position, *onto.positions[:49]]
        if a.cutting_height is not None:
            changes["settings"] = msgspec.structs.replace(
                onto.settings, cutting_height=a.cutting_height.height
            )
        if changes and not onto.metadata.connected:
            changes["metadata"] = msgspec.structs.replace(onto.metadata, connected=True)
        return msgspec.structs.replace(onto, **changes) if changes else onto


def decode_snapshot(payload: bytes) -> Snapshot:
    """A ``GET /mowers`` answer; ``ProtocolError`` when it is not one."""
    try:
        return msgspec.json.decode(payload, type=Snapshot)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise ProtocolError(f"not a mowers list: {err}") from None


def decode_event(payload: str | bytes) -> Event | None:
    """A WebSocket message as an event; None for one that is not (an empty keep-alive, a
    ``pong``); ``ProtocolError`` for JSON that is not an event."""
    if not payload or payload in ("pong", b"pong"):
        return None
    try:
        return msgspec.json.decode(payload, type=Event)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise ProtocolError(f"not an event: {err}") from None
