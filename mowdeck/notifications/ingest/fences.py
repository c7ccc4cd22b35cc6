"""Site fences: a site's areas as prepared polygons, and where a position lies against them.

``SiteFence`` is one site's areas at one version, in local metres around the site (an
equirectangular projection: exact to centimetres over a site's few hundred metres),
built once per version with shapely and prepared. ``place`` answers the geofence rules'
``Placement``: 0 inside, else how far outside every work area or how deep in a stay-out
zone. A site without work areas fences nothing but its stay-out zones.

Point-in-polygon must stay cheap at every state (docs/performance.md, "notifications_replay"):
``place`` also answers how far a position inside lies from the nearest edge, and
``Fences`` (``ingest/sites.py``) keeps that per mower, so the next position within that
circle is known inside without asking GEOS. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import shapely
from shapely.geometry.base import BaseGeometry

from contracts.v1 import Area, SiteAreas
from mowdeck.notifications.rules.geofence import INSIDE, Placement

__all__ = ["SiteFence"]

_M_PER_DEG = math.pi / 180.0 * 6_371_008.8


def _polygon(area: Area, lat0: float, lon0: float, kx: float) -> BaseGeometry:
    rings = [[((lon - lon0) * kx, (lat - lat0) * _M_PER_DEG) for lon, lat in r] for r in area.rings]
    polygon = shapely.Polygon(rings[0], rings[1:])
    # Fleet validates; a polygon still invalid by GEOS's rules (a touching hole) is mended.
    return polygon if polygon.is_valid else shapely.make_valid(polygon)


def _prepared(geometries: Sequence[BaseGeometry]) -> BaseGeometry | None:
    if not geometries:
        return None
    union = shapely.union_all(geometries)
    shapely.prepare(union)
    # The first query builds the prepared geometry's index: done here, on one thread, so
    # the watch actors' worker threads only ever read it.
    shapely.contains_xy(union, 0.0, 0.0)
    return union


class SiteFence:
    """One site's areas at ``version``, prepared for ``place``."""

    __slots__ = ("_boundary", "_kx", "_lat0", "_lon0", "_stay", "_work", "_zones", "version")

    def __init__(self, site: SiteAreas) -> None:
        self.version = site.version
        first = site.areas[0].rings[0][0] if site.areas else (0.0, 0.0)
        self._lon0, self._lat0 = first
        self._kx = _M_PER_DEG * math.cos(math.radians(self._lat0))
        work = [_polygon(a, self._lat0, self._lon0, self._kx) for a in site.areas
                if a.kind == "work_area"]  # fmt: skip
        self._zones = [
            (a.name, _polygon(a, self._lat0, self._lon0, self._kx))
            for a in site.areas
            if a.kind == "stay_out"
        ]
        self._work = _prepared(work)
        self._stay = _prepared([z for _, z in self._zones])
        edges = [g.boundary for g in (self._work, self._stay) if g is not None]
        self._boundary = shapely.union_all(edges) if edges else None

    @property
    def empty(self) -> bool:
        """True when the site has no area: nothing to judge."""
        return self._boundary is None

    def local(self, lat: float, lon: float) -> tuple[float, float]:
        """A position in this fence's local metres (x east, y north)."""
        return (lon - self._lon0) * self._kx, (lat - self._lat0) * _M_PER_DEG

    def place(self, x: float, y: float) -> tuple[Placement, float]:
        """Where local ``(x, y)`` lies, and (inside) how far the nearest edge is."""
        work, stay, boundary = self._work, self._stay, self._boundary
        if boundary is None:
            return INSIDE, math.inf
        outside = work is not None and not shapely.contains_xy(work, x, y)
        in_zone = stay is not None and shapely.intersects_xy(stay, x, y)
        point = shapely.Point(x, y)
        if not outside and not in_zone:
            return INSIDE, shapely.distance(boundary, point)
        metres, zone = 0.0, None
        if outside:
            metres = shapely.distance(work, point)
        if in_zone:
            for name, polygon in self._zones:
                if shapely.intersects_xy(polygon, x, y):
                    depth = shapely.distance(polygon.boundary, point)
                    if depth >= metres:
                        metres, zone = depth, name
        # On an edge (0 m) the mower is still outside: its escape has begun.
        return Placement(max(metres, 1e-9), zone), 0.0
