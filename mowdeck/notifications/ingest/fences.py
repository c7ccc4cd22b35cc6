"""Site fences: a site's areas as prepared polygons, and where a position lies against them.

``SiteFence`` is one site's areas at one version, in local metres around the site (an
equirectangular projection: exact to centimetres over a site's few hundred metres),
built once per version with shapely and prepared. ``place`` answers the geofence rules'
``Placement``: 0 inside, else how far outside every work area or how deep in a stay-out
zone. A site without work areas fences nothing but its stay-out zones.

Point-in-polygon must stay cheap at every state (docs/performance.md, "notifications_replay"):
a fence also keeps a grid over its areas (at most 100 cells a side, none under 1 m) of
the cells wholly on permitted ground, found once with shapely; a position in such a cell
is inside after a few multiplications and a lookup. Only positions near an edge, or outside,
ask GEOS. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import shapely
from shapely.geometry.base import BaseGeometry

from contracts.v1 import Area, SiteAreas
from mowdeck.notifications.rules.geofence import INSIDE, Placement

__all__ = ["SiteFence"]

_M_PER_DEG = math.pi / 180.0 * 6_371_008.8
# The grid of cells known to be inside: at most this many cells a side, none smaller.
_CELLS = 100
_MIN_CELL = 1.0


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
        "_cell", "_grid", "_gx", "_gy", "_kx", "_lat0", "_lon0", "_nx", "_ny", "_per_cell", "_stay",
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
        self._per_cell = 1.0 / self._cell if self._cell else 0.0

    @property
    def empty(self) -> bool:
        """True when the site has no area: nothing to judge."""
        return self._work is None and self._stay is None

    def _cells(self) -> bytes:
        """Which cells of a grid over the areas lie wholly on permitted ground (1): those
        whose centre is on it and that no edge passes through."""
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
        k = np.arange(nx * ny)
        xs, ys = minx + (k % nx + 0.5) * cell, miny + (k // nx + 0.5) * cell
        on = np.ones(nx * ny, dtype=bool) if work is None else shapely.contains_xy(work, xs, ys)
        if stay is not None:
            on &= ~shapely.intersects_xy(stay, xs, ys)
        on &= ~self._edges(nx, ny)
        return on.astype(np.uint8).tobytes()

    def _edges(self, nx: int, ny: int) -> npt.NDArray[np.bool_]:
        """The cells an edge of any area may pass through: around points every half cell
        along each edge, with their neighbours (every point of an edge is within half a
        cell of such a point, so in its cell or a neighbour)."""
        cell, edge = self._cell, np.zeros(nx * ny, dtype=bool)
        for geometry in (self._work, self._stay):
            if geometry is None:
                continue
            for line in shapely.get_parts(shapely.boundary(geometry)):
                c = shapely.get_coordinates(line)
                a, d = c[:-1], c[1:] - c[:-1]
                steps = np.maximum(1, np.ceil(np.hypot(d[:, 0], d[:, 1]) / (cell / 2)))
                steps = steps.astype(np.int64)
                seg = np.repeat(np.arange(len(a)), steps + 1)
                first = np.repeat(np.cumsum(steps + 1) - (steps + 1), steps + 1)
                t = (np.arange(len(seg)) - first) / steps[seg]
                px, py = a[seg, 0] + d[seg, 0] * t, a[seg, 1] + d[seg, 1] * t
                i = np.floor((px - self._gx) / cell).astype(np.int64)
                j = np.floor((py - self._gy) / cell).astype(np.int64)
                for di in (-1, 0, 1):
                    for dj in (-1, 0, 1):
                        ii, jj = i + di, j + dj
                        ok = (ii >= 0) & (ii < nx) & (jj >= 0) & (jj < ny)
                        edge[jj[ok] * nx + ii[ok]] = True
        return edge

    def local(self, lat: float, lon: float) -> tuple[float, float]:
        """A position in this fence's local metres (x east, y north)."""
        return (lon - self._lon0) * self._kx, (lat - self._lat0) * _M_PER_DEG

    def place(self, lat: float, lon: float) -> Placement:
        """Where a WGS84 position lies against the areas (called with every state: kept
        to a few arithmetic operations when the grid knows the answer)."""
        x, y = (lon - self._lon0) * self._kx, (lat - self._lat0) * _M_PER_DEG
        i, j = (x - self._gx) * self._per_cell, (y - self._gy) * self._per_cell
        if 0.0 <= i < self._nx and 0.0 <= j < self._ny:
            if self._grid[int(j) * self._nx + int(i)]:
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
