"""Site fences and ``Geofences``: where a position lies against its mower's site's areas."""

from __future__ import annotations

import math
import random
import uuid

import pytest

from contracts.v1 import Area, MowerRegistration, SiteAreas
from contracts.v1.fleet import Connection
from mowdeck.notifications.ingest.fences import SiteFence
from mowdeck.notifications.ingest.geofences import Geofences
from mowdeck.notifications.rules.geofence import INSIDE
from tests.unit.notifications.samples import ACCOUNT, MOWER, OTHER_MOWER, state

SITE = uuid.UUID("00000000-0000-4000-8000-000000000051")
LAT, LON = 52.5, 13.4
M_LAT = 1.0 / 111_195  # a metre north in degrees
M_LON = M_LAT / math.cos(math.radians(LAT))


def ring(x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, float]]:
    """A closed rectangle from local metres to [lon, lat]."""
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]
    return [(LON + x * M_LON, LAT + y * M_LAT) for x, y in corners]


def site(version: int = 1, *, stay_out: bool = True, work: bool = True) -> SiteAreas:
    """A 40 x 30 m work area with a 10 x 10 m pond in it."""
    areas = []
    if work:
        areas.append(Area(name="lawn", kind="work_area", rings=[ring(0, 0, 40, 30)]))
    if stay_out:
        areas.append(Area(name="pond", kind="stay_out", rings=[ring(15, 10, 25, 20)]))
    return SiteAreas(site_id=SITE, account_id=ACCOUNT, version=version, areas=areas)


def at(x: float, y: float, mower: uuid.UUID = MOWER) -> object:
    """The state of ``mower`` at local (x, y) metres."""
    return state(mower_id=mower, lat=LAT + y * M_LAT, lon=LON + x * M_LON)


def fenced(*sites: SiteAreas) -> Geofences:
    fences = Geofences()
    for s in sites:
        fences.apply_areas(s)
    reg = MowerRegistration(
        mower_id=MOWER, account_id=ACCOUNT, name="m", connection=Connection(kind="simulator"),
        site_id=SITE,
    )  # fmt: skip
    fences.apply_mower(reg)
    return fences


@pytest.mark.parametrize(
    ("x", "y", "metres", "zone"),
    [
        (5, 5, 0.0, None),
        (39.5, 29.5, 0.0, None),
        (50, 15, 10.0, None),
        (20, -7, 7.0, None),
        (20, 15, 5.0, "pond"),
        (16, 15, 1.0, "pond"),
    ],
    ids=["inside", "inside-near-a-corner", "10-m-east", "7-m-south", "pond-centre", "pond-edge"],
)
def test_a_fence_places_a_position(x: float, y: float, metres: float, zone: str | None) -> None:
    placement = fenced(site()).placement(at(x, y))  # type: ignore[arg-type]
    assert placement is not None
    assert placement.outside_m == pytest.approx(metres, abs=0.05)
    assert placement.stay_out == zone


def test_a_site_of_stay_out_zones_only_fences_nothing_else() -> None:
    fences = fenced(site(work=False))
    assert fences.placement(at(500, 500)) == INSIDE  # type: ignore[arg-type]
    assert fences.placement(at(20, 15)).stay_out == "pond"  # type: ignore[arg-type,union-attr]


def test_a_mower_without_a_site_or_a_position_is_not_fenced() -> None:
    fences = fenced(site())
    assert fences.placement(at(500, 500, OTHER_MOWER)) == INSIDE  # type: ignore[arg-type]
    assert fences.placement(state(lat=None)) is None


def test_the_highest_version_wins_and_a_removed_site_stays_removed() -> None:
    fences = fenced(site(3))
    assert not fences.apply_areas(site(2, stay_out=False))
    assert fences.placement(at(20, 15)).stay_out == "pond"  # type: ignore[arg-type,union-attr]
    assert fences.apply_areas(site(4, stay_out=False))
    assert fences.placement(at(20, 15)) == INSIDE  # type: ignore[arg-type]
    fences.remove_site(SITE)
    assert not fences.apply_areas(site(5))
    assert fences.placement(at(500, 500)) == INSIDE  # type: ignore[arg-type]


def test_a_mower_moved_off_its_site_is_no_longer_fenced() -> None:
    fences = fenced(site())
    fences.apply_mower(
        MowerRegistration(mower_id=MOWER, account_id=ACCOUNT, name="m",
                          connection=Connection(kind="simulator"))
    )  # fmt: skip
    assert fences.placement(at(500, 500)) == INSIDE  # type: ignore[arg-type]


@pytest.mark.parametrize("with_work", [True, False], ids=["work-area", "stay-out-only"])
def test_the_grid_answers_as_geos_would(with_work: bool) -> None:
    # Positions all over and around the site, many near an edge: the grid's quick
    # answer (a cell wholly inside) never differs from asking GEOS.
    s = site(work=with_work)
    fence = SiteFence(s)
    rng = random.Random(5)
    for _ in range(4000):
        lat, lon = LAT + rng.uniform(-20, 50) * M_LAT, LON + rng.uniform(-20, 60) * M_LON
        got = fence.place(lat, lon)
        expected = fence._exact(*fence.local(lat, lon))
        assert got.outside_m == pytest.approx(expected.outside_m, abs=1e-9), (lat, lon)
        assert got.stay_out == expected.stay_out
