"""The operations of the simulator's HTTP side (``simulator/server.py``), for its OpenAPI
document. The simulator asks for no token: it is a test and development tool."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from contracts.v1 import Area, Connection, MowerRegistration, MowerState
from mowdeck.kit.openapi import OPS_OPERATIONS, Body, OneOf, Operation, Param, document
from simulator.areas import AreaCollection, AreaFeature, AreaPolygon, AreaProperties
from simulator.faults import (
    BatteryFault,
    ErrorFault,
    EscapeFault,
    LatencyFault,
    LinkLossFault,
    RejectFault,
    SilenceFault,
    StuckFault,
    TheftFault,
)
from simulator.model import CommandRecord
from simulator.views import (
    AreasView,
    FaultsView,
    FramesView,
    Garden,
    Health,
    MowerDetail,
    MowerList,
    MowerSummary,
)

__all__ = ["OPERATIONS", "openapi"]

_AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
_MOWER = uuid.UUID("6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f")
_ACCOUNT = uuid.UUID("a0c1e2f3-4455-4677-8899-aabbccddeeff")
_URL = f"ws://127.0.0.1:8765/mowers/{_MOWER}/ws"
_SUMMARY = MowerSummary(
    mower_id=_MOWER, name="Back garden", activity="docked", battery=98.5, connected=True, faults={}
)
_ID = Param("mower_id", "path", uuid.UUID, "The simulated mower's id.")
_TAGS = ("simulator",)
_FAULTS = OneOf(
    (
        StuckFault,
        ErrorFault,
        LinkLossFault,
        SilenceFault,
        LatencyFault,
        RejectFault,
        BatteryFault,
        EscapeFault,
        TheftFault,
    )
)
_RING = [
    [11.575, 48.137],
    [11.5753, 48.137],
    [11.5753, 48.1372],
    [11.575, 48.1372],
    [11.575, 48.137],
]
_AREAS = AreaCollection(
    type="FeatureCollection",
    features=[
        AreaFeature(
            type="Feature",
            geometry=AreaPolygon(type="Polygon", coordinates=[_RING]),
            properties=AreaProperties(kind="work_area", name="front"),
        )
    ],
)

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "GET",
        "/mowers/{mower_id}/ws",
        "mowerLink",
        "A mower's device link: the WebSocket the gateway connects to (docs/device-protocol.md).",
        {101: "Switching to the WebSocket protocol."},
        params=(_ID,),
        problems=(404, 503),
        public=True,
        tags=("device",),
        streaming=True,
    ),
    Operation(
        "GET",
        "/sim/mowers",
        "listSimulatedMowers",
        "Every simulated mower at a glance.",
        {200: Body(MowerList, MowerList(count=1, mowers=[_SUMMARY]))},
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/sim/mowers/{mower_id}",
        "getSimulatedMower",
        "A simulated mower in full.",
        {
            200: Body(
                MowerDetail,
                MowerDetail(
                    **{f: getattr(_SUMMARY, f) for f in _SUMMARY.__struct_fields__},
                    account_id=_ACCOUNT,
                    url=_URL,
                    state=MowerState(
                        mower_id=_MOWER,
                        account_id=_ACCOUNT,
                        observed_at=_AT,
                        activity="docked",
                        battery=98,
                    ),
                    garden=Garden(polygon=[[52.52, 13.405]], dock=[52.52, 13.405]),
                    commands=[
                        CommandRecord(
                            command_id=uuid.UUID(int=1), kind="pause_mow", received_at=_AT
                        )
                    ],
                ),
            )
        },
        params=(_ID,),
        problems=(404,),
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/sim/mowers/{mower_id}/frames",
        "getCommandFrames",
        "How many command frames the mower received, by command id.",
        {200: Body(FramesView, FramesView(count=1, frames={str(uuid.UUID(int=1)): 1}))},
        params=(_ID,),
        problems=(404,),
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "POST",
        "/sim/mowers/{mower_id}/faults",
        "injectFault",
        "Inject a fault into a mower.",
        {200: Body(FaultsView, FaultsView(faults={"latency": {"ms": 500}}))},
        params=(_ID,),
        body=Body(_FAULTS, LatencyFault(ms=500)),
        problems=(404, 422),
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "DELETE",
        "/sim/mowers/{mower_id}/faults",
        "clearFaults",
        "Clear every fault of a mower.",
        {200: Body(FaultsView, FaultsView(faults={}))},
        params=(_ID,),
        problems=(404,),
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "PUT",
        "/sim/mowers/{mower_id}/areas",
        "setAreas",
        "Set the mower's site areas: a `start_mow` with `work_area` mows inside that one,"
        " out of the stay-out zones.",
        {
            200: Body(
                AreasView, AreasView(areas=[Area(name="front", kind="work_area", rings=[_RING])])
            )
        },
        params=(_ID,),
        body=Body(AreaCollection, _AREAS),
        problems=(404, 422),
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/sim/registrations",
        "listRegistrations",
        "Every mower as Fleet registers it (connection kind `simulator`).",
        {
            200: Body(
                list[MowerRegistration],
                [
                    MowerRegistration(
                        mower_id=_MOWER,
                        account_id=_ACCOUNT,
                        name="Back garden",
                        connection=Connection(kind="simulator", options={"url": _URL}),
                    )
                ],
            )
        },
        public=True,
        tags=_TAGS,
    ),
    Operation(
        "GET",
        "/healthz",
        "health",
        "The simulator is up.",
        {200: Body(Health, Health(status="ok", mowers=1, states_sent=10, states_skipped=0))},
        public=True,
        tags=("operations",),
    ),
)


def openapi(version: str = "1") -> dict[str, Any]:
    """The simulator's OpenAPI document."""
    doc = document(
        "Mowdeck simulator",
        version,
        OPERATIONS,
        "Simulated mowers: their device links, introspection and fault injection.",
        ops_operations=[op for op in OPS_OPERATIONS if op.operation_id in ("openapi", "metrics")],
    )
    doc.pop("security")
    return doc
