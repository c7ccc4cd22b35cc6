"""Garden geometry: the stripe path, containment and the lat/lon projection."""

from __future__ import annotations

import pytest

from simulator.garden import Garden, heading_to

G = Garden(base_lat=48.0, base_lon=11.0, width=10.0, depth=2.0, lane=0.5)


@pytest.mark.parametrize(
    ("progress", "point"),
    [
        (0.0, (0.0, 0.25, 90.0)),
        (4.0, (4.0, 0.25, 90.0)),
        (10.25, (10.0, 0.5, 0.0)),
        (11.5, (9.0, 0.75, 270.0)),
        (1e9, (0.0, 1.75, 270.0)),
    ],
    ids=["start", "first-lane", "turn", "second-lane-westward", "clamped-at-end"],
)
def test_stripe_point(progress: float, point: tuple[float, float, float]) -> None:
    wp = G.stripe_point(progress)
    assert (wp.x, wp.y, wp.heading) == pytest.approx(point)


def test_path_length_counts_lanes_and_turns() -> None:
    assert G.lanes == 4
    assert G.path_length == pytest.approx(4 * 10.0 + 3 * 0.5)


def test_latlon_is_centred_on_the_base() -> None:
    lat, lon = G.to_latlon(G.width / 2, G.depth / 2)
    assert (lat, lon) == pytest.approx((48.0, 11.0))
    north, east = G.to_latlon(G.width / 2 + 100, G.depth / 2 + 111.32)
    assert north == pytest.approx(48.001)
    assert east > 11.0


@pytest.mark.parametrize(
    ("dx", "dy", "heading"),
    [(0, 1, 0.0), (1, 0, 90.0), (0, -1, 180.0), (-1, 0, 270.0)],
    ids=["north", "east", "south", "west"],
)
def test_heading_is_a_compass_bearing(dx: float, dy: float, heading: float) -> None:
    assert heading_to(dx, dy) == pytest.approx(heading)


def test_polygon_has_four_corners_inside_which_the_dock_is_near() -> None:
    assert len(G.polygon()) == 4
    assert G.contains(G.dock_x, G.dock_y)
    assert not G.contains(G.width + 5, 0)
