"""A garden: a rectangular lawn around a base position, its dock and its stripe path."""

from __future__ import annotations

import math

import msgspec

from simulator.areas import Route

__all__ = ["METRES_PER_DEGREE", "Garden", "Waypoint", "heading_to"]

# Equirectangular projection is accurate to centimetres over a garden's few dozen metres.
METRES_PER_DEGREE = 111_320.0


class Waypoint(msgspec.Struct, frozen=True, array_like=True):
    """A point of the lawn in local metres (x east, y north) with a compass heading."""

    x: float
    y: float
    heading: float


class Garden(msgspec.Struct, frozen=True, kw_only=True):
    """A ``width`` x ``depth`` metre lawn centred on ``base_lat``/``base_lon``.

    Local coordinates put the lawn's south-west corner at (0, 0); the dock sits just south
    of that corner, outside the lawn, like a charging station on a path.
    """

    base_lat: float
    base_lon: float
    width: float = 30.0
    depth: float = 20.0
    lane: float = 0.25
    dock_x: float = 0.0
    dock_y: float = -1.0
    # The route through a named work area (``simulator/areas.py``), while a job mows one;
    # None: the stripes across the whole lawn.
    route: Route | None = None

    @property
    def lanes(self) -> int:
        """The number of stripes across the lawn."""
        return max(1, int(self.depth / self.lane))

    @property
    def path_length(self) -> float:
        """Metres of the whole stripe pattern (lanes plus the turns between them), or of
        the work area's route."""
        if self.route is not None:
            return self.route.length
        return self.lanes * self.width + (self.lanes - 1) * self.lane

    def stripe_point(self, progress: float) -> Waypoint:
        """Where the mower is after ``progress`` metres of the boustrophedon pattern (or
        of the work area's route)."""
        if self.route is not None:
            return Waypoint(*self.route.point(progress))
        progress = min(max(progress, 0.0), self.path_length)
        period = self.width + self.lane
        k = min(int(progress // period), self.lanes - 1)
        r = progress - k * period
        y0 = k * self.lane + self.lane / 2
        if r <= self.width:
            if k % 2 == 0:
                return Waypoint(r, y0, 90.0)
            return Waypoint(self.width - r, y0, 270.0)
        # The short turn north onto the next lane.
        x = self.width if k % 2 == 0 else 0.0
        return Waypoint(x, y0 + (r - self.width), 0.0)

    def contains(self, x: float, y: float, margin: float = 2.0) -> bool:
        """True while (x, y) is on the lawn or within ``margin`` metres of its edge."""
        return -margin <= x <= self.width + margin and -margin <= y <= self.depth + margin

    def to_local(self, lat: float, lon: float) -> tuple[float, float]:
        """The local point of a WGS84 position (``to_latlon`` reversed)."""
        scale = METRES_PER_DEGREE * math.cos(math.radians(self.base_lat))
        y = (lat - self.base_lat) * METRES_PER_DEGREE + self.depth / 2
        return (lon - self.base_lon) * scale + self.width / 2, y

    def to_latlon(self, x: float, y: float) -> tuple[float, float]:
        """WGS84 latitude and longitude of a local point."""
        lat = self.base_lat + (y - self.depth / 2) / METRES_PER_DEGREE
        scale = METRES_PER_DEGREE * math.cos(math.radians(self.base_lat))
        lon = self.base_lon + (x - self.width / 2) / scale
        return lat, lon

    def polygon(self) -> list[tuple[float, float]]:
        """The lawn's corners as (lat, lon), counter-clockwise from the south-west."""
        corners = ((0.0, 0.0), (self.width, 0.0), (self.width, self.depth), (0.0, self.depth))
        return [self.to_latlon(x, y) for x, y in corners]


def heading_to(dx: float, dy: float) -> float:
    """Compass heading in degrees [0, 360) of the vector (dx east, dy north)."""
    return math.degrees(math.atan2(dx, dy)) % 360.0
