"""Work areas in the simulator: routes inside the area and out of its stay-out zones, and
the faults ``escape`` and ``theft``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
import shapely

from contracts.v1 import Area, StartMow
from simulator import EscapeFault, Garden, Params, TheftFault, VirtualMower
from simulator.areas import AreaError, decode_areas, plan_route
from simulator.physics import Body

GARDEN = Garden(base_lat=48.137, base_lon=11.575, width=40.0, depth=30.0)
# An L of 30 x 24 m less its north-east 14 x 12 m, a 6 x 6 m pond in the L's foot.
L_SHAPE = [(2, 2), (32, 2), (32, 14), (18, 14), (18, 26), (2, 26), (2, 2)]
POND = [(8, 5), (14, 5), (14, 11), (8, 11), (8, 5)]


def geo(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Local garden metres as GeoJSON positions [lon, lat]."""
    return [(lon, lat) for lat, lon in (GARDEN.to_latlon(x, y) for x, y in points)]


AREAS = (
    Area(name="front", kind="work_area", rings=[geo(L_SHAPE)]),
    Area(name="pond", kind="stay_out", rings=[geo(POND)]),
    Area(name="back", kind="work_area", rings=[geo([(34, 2), (39, 2), (39, 8), (34, 8), (34, 2)])]),
)
ALLOWED = shapely.Polygon(L_SHAPE).difference(shapely.Polygon(POND))


def mower(**body: object) -> VirtualMower:
    m = VirtualMower(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name="m",
        garden=GARDEN,
        params=Params(),
        body=Body(**body),  # type: ignore[arg-type]
        seed=1,
        now=0.0,
    )
    m.areas = AREAS
    return m


def test_a_route_stays_inside_its_area_and_out_of_its_stay_out_zones() -> None:
    route = plan_route(AREAS, "front", GARDEN.to_local, lane=0.5, margin=0.3)
    # Every point along the way, every 10 cm, not only the corners.
    steps = int(route.length / 0.1)
    points = [route.point(i * 0.1)[:2] for i in range(steps + 1)]
    outside = [p for p in points if not ALLOWED.covers(shapely.Point(p))]
    assert outside == []
    # It covers the area: lanes half a metre apart pass near every part of it.
    covered = shapely.LineString(points).buffer(0.5)
    assert covered.intersection(ALLOWED).area / ALLOWED.area > 0.9


def test_an_unknown_or_too_small_area_is_refused() -> None:
    with pytest.raises(AreaError, match="no work area named 'pond'"):
        plan_route(AREAS, "pond", GARDEN.to_local, lane=0.5, margin=0.3)
    tiny = (Area(name="tiny", kind="work_area", rings=[geo([(0, 0), (0.4, 0), (0.4, 0.4),
                                                           (0, 0.4), (0, 0)])]),)  # fmt: skip
    with pytest.raises(AreaError, match="leaves no room"):
        plan_route(tiny, "tiny", GARDEN.to_local, lane=0.5, margin=0.3)


def test_a_mower_told_to_mow_an_area_mows_only_there() -> None:
    m = mower()
    assert m.execute(StartMow(work_area="back"), 0.0) is None
    seen = []
    for t in range(1, 3600):
        m.advance(float(t))
        if m.body.activity == "mowing":
            seen.append((m.body.x, m.body.y))
    back = shapely.Polygon([(34, 2), (39, 2), (39, 8), (34, 8)])
    assert len(seen) > 50
    assert [p for p in seen if not back.covers(shapely.Point(p))] == []
    assert m.body.activity in ("returning", "charging", "docked")  # done, then home


def test_a_start_in_an_unknown_area_fails_and_changes_nothing() -> None:
    m = mower()
    assert m.execute(StartMow(work_area="nowhere"), 0.0) == "no work area named 'nowhere'"
    assert m.body.activity == "docked"
    m.areas = ()
    assert "no work area" in (m.execute(StartMow(work_area="front"), 1.0) or "")


def test_a_start_without_an_area_mows_the_whole_lawn_again() -> None:
    m = mower()
    m.execute(StartMow(work_area="back"), 0.0)
    m.execute(StartMow(), 1.0)
    assert m.garden.route is None


def test_escape_drives_out_of_the_area_mowing_and_clearing_drives_home() -> None:
    m = mower(activity="mowing", x=20.0, y=8.0, job="active")
    m.inject(EscapeFault(), 0.0, 0.0)
    m.advance(60.0)
    escaping = m.body
    assert escaping.activity == "mowing"
    assert shapely.Polygon(L_SHAPE).distance(shapely.Point(m.body.x, m.body.y)) > 10
    assert "escape" in m.faults(0.0)
    m.clear_faults(61.0)
    assert m.body.activity == "returning"
    assert m.faults(0.0) == {}


def test_theft_carries_the_mower_away_fast_with_its_blades_stopped() -> None:
    m = mower(activity="mowing", x=20.0, y=8.0, job="active")
    m.inject(TheftFault(speed_mps=8.0), 0.0, 0.0)
    start = (m.body.x, m.body.y)
    m.advance(10.0)
    state = m.state(datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    assert (state.activity, state.error_code) == ("error", "lifted")
    moved = shapely.Point(start).distance(shapely.Point(m.body.x, m.body.y))
    assert moved == pytest.approx(80.0, rel=0.01)
    assert m.faults(0.0)["theft"] == {"speed_mps": 8.0}
    m.clear_faults(11.0)
    assert m.body.activity == "idle"
    before = (m.body.x, m.body.y)
    m.advance(20.0)
    assert (m.body.x, m.body.y) == before


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        (b'{"type": "FeatureCollection", "features": [{"type": "Feature", "properties":'
         b' {"kind": "work_area", "name": "a"}, "geometry": {"type": "Polygon",'
         b' "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]}}]}', "features[0]"),
        (b'{"type": "FeatureCollection", "features": [{"type": "Feature", "properties":'
         b' {"kind": "garden", "name": "a"}, "geometry": {"type": "Polygon",'
         b' "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}}]}', "kind"),
        (b'{"type": "FeatureCollection", "features": [{"type": "Feature", "properties":'
         b' {"kind": "stay_out", "name": "a"}, "geometry": {"type": "Polygon",'
         b' "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}}]}', "crosses itself"),
    ],
    ids=["ring-not-closed", "unknown-kind", "self-intersecting"],
)  # fmt: skip
def test_bad_areas_are_refused_with_a_reason(doc: bytes, reason: str) -> None:
    with pytest.raises(AreaError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        decode_areas(doc)
