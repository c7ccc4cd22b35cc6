"""Site fences: a site's areas as prepared polygons, and where a position lies against them.

``SiteFence`` is one site's areas at one version, in local metres around the site (an
equirectangular projection: exact to centimetres over a site's few hundred metres),
built once per version with shapely and prepared. ``place`` answers the geofence rules'
``Placement``: 0 inside, else how far outside every work area or how deep in a stay-out
zone. A site without work areas fences nothing but its stay-out zones.

Point-in-polygon must stay cheap at every state (docs/performance.md, "notifications_replay"):
a fence also keeps a grid over its areas (at most 128 cells a side, none under 0.5 m) of
the cells wholly on permitted ground, found once with shapely; a position in such a cell
is inside after two divisions and a lookup. Only positions near an edge, or outside,
ask GEOS. Nothing here does I/O or reads a clock.
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
# The grid of cells known to be inside: at most this many cells a side, none smaller.
_CELLS = 128
_MIN_CELL = 0.5


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

    __slots__ = (
        "_cell", "_grid", "_gx", "_gy", "_kx", "_lat0", "_lon0", "_nx", "_ny", "_stay",
        "_work", "_zones", "version",
    )  # fmt: skip

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
        self._grid = self._cells()

    @property
    def empty(self) -> bool:
        """True when the site has no area: nothing to judge."""
        return self._work is None and self._stay is None

    def _cells(self) -> bytes:
        """Which cells of a grid over the areas lie wholly on permitted ground (1)."""
        work, stay = self._work, self._stay
        outline = work if work is not None else stay
        if outline is None:
            self._gx = self._gy = self._cell = 0.0
            self._nx = self._ny = 0
            return b""
        minx, miny, maxx, maxy = outline.bounds
        self._cell = cell = max((maxx - minx) / _CELLS, (maxy - miny) / _CELLS, _MIN_CELL)
        self._gx, self._gy = minx, miny
        self._nx = nx = max(1, math.ceil((maxx - minx) / cell))
        self._ny = ny = max(1, math.ceil((maxy - miny) / cell))
        x0 = [minx + (k % nx) * cell for k in range(nx * ny)]
        y0 = [miny + (k // nx) * cell for k in range(nx * ny)]
        boxes = shapely.box(x0, y0, [x + cell for x in x0], [y + cell for y in y0])
        inside = [True] * len(x0) if work is None else shapely.contains(work, boxes).tolist()
        clear = [True] * len(x0) if stay is None else (~shapely.intersects(stay, boxes)).tolist()
        return bytes(1 if a and b else 0 for a, b in zip(inside, clear, strict=True))

    def local(self, lat: float, lon: float) -> tuple[float, float]:
        """A position in this fence's local metres (x east, y north)."""
        return (lon - self._lon0) * self._kx, (lat - self._lat0) * _M_PER_DEG

    def place(self, x: float, y: float) -> Placement:
        """Where local ``(x, y)`` lies against the areas."""
        dx, dy = x - self._gx, y - self._gy
        if dx >= 0.0 and dy >= 0.0:
            i, j = int(dx / self._cell), int(dy / self._cell)
            if i < self._nx and j < self._ny and self._grid[j * self._nx + i]:
                return INSIDE  # a cell wholly inside: no need to ask GEOS
        elif self._work is None:
            return INSIDE  # off the stay-out zones' grid: in none of them
        return self._exact(x, y)

    def _exact(self, x: float, y: float) -> Placement:
        work, stay = self._work, self._stay
        outside = work is not None and not shapely.contains_xy(work, x, y)
        in_zone = stay is not None and shapely.intersects_xy(stay, x, y)
        if not outside and not in_zone:
            return INSIDE
        point = shapely.Point(x, y)
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
        return Placement(max(metres, 1e-9), zone)
