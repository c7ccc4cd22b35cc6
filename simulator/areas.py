"""Work areas: a mower's site areas in its garden's metres, and a mowing route inside one.

A mower learns its areas through the control API (``PUT /sim/mowers/{id}/areas``, the
GeoJSON FeatureCollection an operator puts to Fleet). A ``start_mow`` naming a work area
plans a ``Route``: lanes ``lane`` metres apart across the area less its stay-out zones
(shrunk by ``margin`` so the mower's body stays clear of every edge), alternating in
direction; where the straight move from one lane piece to the next would leave the
permitted ground (a concave edge, a stay-out zone between them), the route follows that
edge instead. The drive from the dock to the route and back is a straight line, as for
the whole lawn. Geometry is shapely's; nothing here does I/O.
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Annotated, Any, Literal

import msgspec
import shapely
from shapely.geometry.base import BaseGeometry

from contracts.v1 import Area
from contracts.v1.sites import Position

__all__ = ["AreaCollection", "AreaError", "Route", "decode_areas", "plan_route"]

_EPS = 1e-6


class AreaError(ValueError):
    """Areas that cannot be used, with the reason."""


class Route(msgspec.Struct, frozen=True, kw_only=True):
    """A mowing path in local metres: its points and the distance along it to each."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    along: tuple[float, ...]

    @property
    def length(self) -> float:
        """Metres of the whole route."""
        return self.along[-1]

    def point(self, progress: float) -> tuple[float, float, float]:
        """Where the mower is after ``progress`` metres: x, y and the compass heading."""
        progress = min(max(progress, 0.0), self.length)
        i = max(1, min(bisect.bisect_left(self.along, progress), len(self.along) - 1))
        x0, y0, x1, y1 = self.xs[i - 1], self.ys[i - 1], self.xs[i], self.ys[i]
        span = self.along[i] - self.along[i - 1]
        f = 0.0 if span <= 0.0 else (progress - self.along[i - 1]) / span
        heading = math.degrees(math.atan2(x1 - x0, y1 - y0)) % 360.0
        return x0 + (x1 - x0) * f, y0 + (y1 - y0) * f, heading


# -- the control API's document ------------------------------------------------------


class AreaProperties(msgspec.Struct, frozen=True):
    """What an area is and what it is called."""

    kind: Literal["work_area", "stay_out"]
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]


class AreaPolygon(msgspec.Struct, frozen=True):
    """Rings of [longitude, latitude], the first the outline, the others holes."""

    type: Literal["Polygon"]
    coordinates: list[list[Position]]


class AreaFeature(msgspec.Struct, frozen=True):
    """One area."""

    type: Literal["Feature"]
    geometry: AreaPolygon
    properties: AreaProperties


class AreaCollection(msgspec.Struct, frozen=True):
    """A mower's areas as an operator puts them to Fleet: Polygon features with
    ``properties.kind`` (``work_area`` or ``stay_out``) and ``properties.name``."""

    type: Literal["FeatureCollection"]
    features: Annotated[list[AreaFeature], msgspec.Meta(max_length=200)]


def decode_areas(data: bytes | str) -> tuple[Area, ...]:
    """Areas from a GeoJSON FeatureCollection, or ``AreaError`` naming what is wrong."""
    try:
        doc = msgspec.json.decode(data, type=AreaCollection)
    except msgspec.DecodeError as err:
        raise AreaError(str(err)) from err
    areas = []
    for i, f in enumerate(doc.features):
        rings = f.geometry.coordinates
        if not rings or any(len(r) < 4 or r[0] != r[-1] for r in rings):
            raise AreaError(f"features[{i}]: every ring needs 4 positions and to be closed")
        if not shapely.Polygon(rings[0], rings[1:]).is_valid:
            raise AreaError(f"features[{i}]: the polygon is not valid (it crosses itself)")
        areas.append(Area(name=f.properties.name, kind=f.properties.kind, rings=rings))
    return tuple(areas)


# -- planning -------------------------------------------------------------------------


def _local(area: Area, to_local: Any) -> BaseGeometry:
    rings = [[to_local(lat, lon) for lon, lat in ring] for ring in area.rings]
    return shapely.Polygon(rings[0], rings[1:])


def plan_route(
    areas: tuple[Area, ...], work_area: str, to_local: Any, *, lane: float, margin: float
) -> Route:
    """The route through ``work_area``; ``to_local(lat, lon)`` gives garden metres."""
    work = [a for a in areas if a.kind == "work_area" and a.name == work_area]
    if not work:
        raise AreaError(f"no work area named {work_area!r}")
    stay = [_local(a, to_local) for a in areas if a.kind == "stay_out"]
    allowed = _local(work[0], to_local)
    if stay:
        allowed = allowed.difference(shapely.union_all(stay))
    allowed = allowed.buffer(-margin)
    if allowed.is_empty:
        raise AreaError(f"work area {work_area!r} leaves no room to mow")
    shapely.prepare(allowed)
    points = _lanes(allowed, lane)
    if len(points) < 2:
        raise AreaError(f"work area {work_area!r} is narrower than a lane")
    return _route(_connected(allowed, points))


def _lanes(allowed: BaseGeometry, lane: float) -> list[tuple[float, float]]:
    """The ends of every lane piece, lane by lane, each lane the other way round."""
    minx, miny, maxx, maxy = allowed.bounds
    points: list[tuple[float, float]] = []
    y, k = miny + lane / 2, 0
    while y < maxy:
        cut = allowed.intersection(shapely.LineString([(minx - 1, y), (maxx + 1, y)]))
        pieces = sorted(
            (sorted((c[0] for c in g.coords)) for g in getattr(cut, "geoms", [cut]) if
             not g.is_empty and g.geom_type == "LineString"),
            key=lambda xs: xs[0],
        )  # fmt: skip
        if k % 2:
            pieces = [xs[::-1] for xs in reversed(pieces)]
        for xs in pieces:
            points += [(xs[0], y), (xs[-1], y)]
        y, k = y + lane, k + 1
    return points


def _connected(
    allowed: BaseGeometry, points: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """``points`` with a detour along an edge wherever the straight move leaves ``allowed``."""
    out = [points[0]]
    for a, b in itertools.pairwise(points):
        if a != b and not allowed.covers(shapely.LineString([a, b])):
            out += _along_edge(allowed, a, b)
        out.append(b)
    return out


def _along_edge(
    allowed: BaseGeometry, a: tuple[float, float], b: tuple[float, float]
) -> list[tuple[float, float]]:
    """The vertices of the edge both ``a`` and ``b`` lie on, the shorter way from a to b."""
    polygons = getattr(allowed, "geoms", [allowed])
    pa, pb = shapely.Point(a), shapely.Point(b)
    for polygon in polygons:
        for ring in (polygon.exterior, *polygon.interiors):
            if ring.distance(pa) > _EPS or ring.distance(pb) > _EPS:
                continue
            da, db, total = ring.project(pa), ring.project(pb), ring.length
            forward = (db - da) % total
            step, span = (1.0, forward) if forward <= total / 2 else (-1.0, total - forward)
            n = max(1, int(span / 0.5))
            return [_xy(ring.interpolate((da + step * span * i / n) % total)) for i in range(1, n)]
    return []  # on no common edge (pieces of separate parts): the straight move


def _xy(point: Any) -> tuple[float, float]:
    return float(point.x), float(point.y)


def _route(points: list[tuple[float, float]]) -> Route:
    along = [0.0]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        along.append(along[-1] + math.hypot(x1 - x0, y1 - y0))
    return Route(xs=tuple(p[0] for p in points), ys=tuple(p[1] for p in points), along=tuple(along))
