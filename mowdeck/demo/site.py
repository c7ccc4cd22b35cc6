"""The demo's site: a park of three of the simulated lawns, with a flower bed kept out.

Made through Fleet's API as an operator would (``POST /v1/sites``, ``PUT .../areas``,
``PATCH /v1/mowers/{id}`` with ``site_id``), and the same areas given to the simulator
(``PUT /sim/mowers/{id}/areas``), so that the console draws the site's areas with its
mowers, a ``start_mow`` naming a lawn mows inside it, and Notifications judges the
mowers' positions against the areas (``left_area``). The flower bed is too small for a
mower crossing it to be told (``MOWDECK_NOTIFICATIONS_GEOFENCE_METRES``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import aiohttp
import structlog

from simulator.garden import Garden

__all__ = ["SITE_NAME", "demo_site"]

log = structlog.get_logger("mowdeck.demo")

SITE_NAME = "Demo park"
_BED_M = 4.0  # the flower bed's side, in metres


def _ring(garden: Garden, corners: Sequence[tuple[float, float]]) -> list[list[float]]:
    points = [garden.to_latlon(x, y) for x, y in corners]
    ring = [[lon, lat] for lat, lon in points]
    return [*ring, ring[0]]


def _feature(name: str, kind: str, ring: list[list[float]]) -> dict[str, Any]:
    return {
        "type": "Feature",
        "properties": {"name": name, "kind": kind},
        "geometry": {"type": "Polygon", "coordinates": [ring]},
    }


def site_areas(gardens: Sequence[Garden]) -> dict[str, Any]:
    """The site's FeatureCollection: each garden's lawn, and a flower bed in the first."""
    features = []
    for i, g in enumerate(gardens, start=1):
        lawn = ((0.0, 0.0), (g.width, 0.0), (g.width, g.depth), (0.0, g.depth))
        features.append(_feature(f"lawn {i}", "work_area", _ring(g, lawn)))
    if gardens:
        g = gardens[0]
        x0, y0 = g.width - _BED_M - 2.0, g.depth - _BED_M - 2.0
        bed = ((x0, y0), (x0 + _BED_M, y0), (x0 + _BED_M, y0 + _BED_M), (x0, y0 + _BED_M))
        features.append(_feature("flower bed", "stay_out", _ring(g, bed)))
    return {"type": "FeatureCollection", "features": features}


async def demo_site(
    fleet_url: str, sim_url: str, token: str, mowers: Sequence[tuple[uuid.UUID, Garden]]
) -> uuid.UUID | None:
    """Make the site of ``mowers`` (their ids and gardens); its id, or None if refused."""
    if not mowers:
        return None
    first = mowers[0][1]
    areas = site_areas([g for _, g in mowers])
    site = {
        "name": SITE_NAME,
        "timezone": "Europe/Berlin",
        "location": {"lat": first.base_lat, "lon": first.base_lon},
    }
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        try:
            async with http.post(f"{fleet_url}/v1/sites", json=site) as r:
                if r.status != 201:
                    log.warning("the demo site was refused", status=r.status, body=await r.text())
                    return None
                site_id = uuid.UUID((await r.json())["site_id"])
            async with http.put(f"{fleet_url}/v1/sites/{site_id}/areas", json=areas) as r:
                r.raise_for_status()
            for mower_id, _ in mowers:
                body = {"site_id": str(site_id)}
                async with http.patch(f"{fleet_url}/v1/mowers/{mower_id}", json=body) as r:
                    r.raise_for_status()
                async with http.put(f"{sim_url}/sim/mowers/{mower_id}/areas", json=areas) as r:
                    r.raise_for_status()
        except aiohttp.ClientError as err:
            log.warning("the demo site is incomplete", error=str(err))
            return None
    log.info("demo site made", site_id=str(site_id), mowers=len(mowers))
    return site_id
