"""The operations of the schedule routes, for Fleet's OpenAPI document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from mowdeck.fleet.schedules.rules import (
    OverrideRequest,
    RestrictionRequest,
    ScheduleRequest,
    TaskSpec,
)
from mowdeck.fleet.schedules.views import (
    OverrideView,
    RestrictedView,
    RestrictionList,
    RestrictionView,
    ScheduleView,
    SlotView,
)
from mowdeck.kit.openapi import Body, Link, Operation, Param

__all__ = ["OPERATIONS"]

_AT = datetime(2026, 5, 4, 6, 30, tzinfo=UTC)
_MOWER = uuid.UUID("6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f")
_SITE = uuid.UUID("5173e000-1234-4abc-8def-0123456789ab")
_RESTRICTION = uuid.UUID("0a1b2c3d-1234-4abc-8def-0123456789ab")
_COMMAND = uuid.UUID("c0ffee00-1234-4abc-8def-0123456789ab")
_TASK = TaskSpec(start="08:30", duration_minutes=90, days=["mon", "wed", "fri"], work_area="front")
_VIEW = ScheduleView(
    mower_id=_MOWER,
    site_id=_SITE,
    enabled=True,
    timezone="Europe/Berlin",
    tasks=[_TASK],
    next_start=None,
    restricted=RestrictedView(reason="rain", until=_AT),
    recent_slots=[
        SlotView(
            start=_AT, end=_AT, task=0, state="held", reason="restricted: rain", command_id=None
        )
    ],
    updated_at=_AT,
)
_RESTRICTED = RestrictionView(
    restriction_id=_RESTRICTION,
    site_id=_SITE,
    reason="rain",
    until=_AT,
    created_at=_AT,
    created_by="user:alice",
    docked=[_COMMAND],
)
_MOWER_ID = Param("mower_id", "path", uuid.UUID, "The mower's id.")
_SITE_ID = Param("site_id", "path", uuid.UUID, "The site's id.")
_OVERRIDE = Body(OverrideRequest, OverrideRequest(override="park_until_next_schedule"))
_OVERRIDDEN = OverrideView(override="park_until_next_schedule", mowers=1, command_ids=[_COMMAND])

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "PUT",
        "/v1/mowers/{mower_id}/schedule",
        "putSchedule",
        "Set a mower's weekly schedule, in its site's time zone (else `timezone`).",
        {200: Body(ScheduleView, _VIEW)},
        params=(_MOWER_ID,),
        body=Body(
            ScheduleRequest,
            ScheduleRequest(enabled=True, tasks=[_TASK], timezone="Europe/Berlin"),
            "`timezone` only for a mower without a site (required then).",
        ),
        problems=(400, 403, 404, 422, 503),
        tags=("schedules",),
    ),
    Operation(
        "GET",
        "/v1/mowers/{mower_id}/schedule",
        "getSchedule",
        "A mower's schedule, its next start, what holds it back and its recent slots (a"
        " mower never given one: an empty one, disabled).",
        {200: Body(ScheduleView, _VIEW)},
        params=(_MOWER_ID,),
        problems=(404, 503),
        tags=("schedules",),
    ),
    Operation(
        "POST",
        "/v1/mowers/{mower_id}/schedule/override",
        "overrideMowerSchedule",
        "Park a mower (docked now) until its next start or further notice, or resume.",
        {200: Body(OverrideView, _OVERRIDDEN)},
        params=(_MOWER_ID,),
        body=_OVERRIDE,
        problems=(400, 403, 404, 422, 503),
        tags=("schedules",),
    ),
    Operation(
        "POST",
        "/v1/sites/{site_id}/schedule/override",
        "overrideSiteSchedules",
        "Park or resume every scheduled mower of a site (those in a slot are docked).",
        {200: Body(OverrideView, _OVERRIDDEN)},
        params=(_SITE_ID,),
        body=_OVERRIDE,
        problems=(400, 403, 404, 422, 503),
        tags=("schedules",),
    ),
    Operation(
        "POST",
        "/v1/sites/{site_id}/restrictions",
        "restrictSite",
        "Hold back every slot of a site's mowers until `until`; dock those mowing now.",
        {201: Body(RestrictionView, _RESTRICTED, "Restricted.")},
        links=(
            Link(
                201,
                "lift",
                "liftSiteRestriction",
                {
                    "site_id": "$request.path.site_id",
                    "restriction_id": "$response.body#/restriction_id",
                },
            ),
        ),
        params=(_SITE_ID,),
        body=Body(RestrictionRequest, RestrictionRequest(reason="rain", until=_AT)),
        problems=(400, 403, 404, 422, 503),
        tags=("schedules",),
    ),
    Operation(
        "GET",
        "/v1/sites/{site_id}/restrictions",
        "listSiteRestrictions",
        "A site's restrictions that have not ended, by end.",
        {200: Body(RestrictionList, RestrictionList(restrictions=[_RESTRICTED]))},
        params=(_SITE_ID,),
        problems=(403, 404, 503),
        tags=("schedules",),
    ),
    Operation(
        "DELETE",
        "/v1/sites/{site_id}/restrictions/{restriction_id}",
        "liftSiteRestriction",
        "End a restriction now.",
        {204: "Lifted."},
        params=(_SITE_ID, Param("restriction_id", "path", uuid.UUID, "The restriction's id.")),
        problems=(403, 404, 503),
        tags=("schedules",),
    ),
)
