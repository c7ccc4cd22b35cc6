"""The pure rules of sites: time zones, patches, and areas as GeoJSON with their refusals."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from mowdeck.fleet.errors import AreaRefusedError, InvalidRequestError
from mowdeck.fleet.sites.model import Location, SitePatch, SiteRecord
from mowdeck.fleet.sites.validation import (
    MAX_AREAS,
    apply_patch,
    check_timezone,
    decode_document,
    parse_areas,
)

SQUARE = [[0.0, 0.0], [0.001, 0.0], [0.001, 0.001], [0.0, 0.001], [0.0, 0.0]]
BOWTIE = [[0.0, 0.0], [0.001, 0.001], [0.001, 0.0], [0.0, 0.001], [0.0, 0.0]]


def feature(name: Any = "Lawn", kind: Any = "work_area", rings: Any = None, **over: Any) -> Any:
    doc = {
        "type": "Feature",
        "properties": {"name": name, "kind": kind},
        "geometry": {"type": "Polygon", "coordinates": [SQUARE] if rings is None else rings},
    }
    doc.update(over)
    return doc


def collection(*features: Any) -> dict[str, Any]:
    return {"type": "FeatureCollection", "features": list(features)}


def test_a_valid_collection_becomes_areas_with_holes_kept() -> None:
    hole = [[0.0002, 0.0002], [0.0004, 0.0002], [0.0004, 0.0004], [0.0002, 0.0002]]
    areas = parse_areas(collection(feature(rings=[SQUARE, hole]), feature("Pond", "stay_out")))
    assert [(a.name, a.kind, len(a.rings)) for a in areas] == [
        ("Lawn", "work_area", 2),
        ("Pond", "stay_out", 1),
    ]
    assert areas[0].rings[0][0] == (0.0, 0.0)


def test_an_altitude_is_dropped() -> None:
    (area,) = parse_areas(collection(feature(rings=[[[*p, 30.5] for p in SQUARE]])))
    assert area.rings[0][1] == (0.001, 0.0)


REFUSED = {
    "not a collection": ({"type": "Feature"}, "features", None, "FeatureCollection"),
    "features not a list": (
        {"type": "FeatureCollection", "features": {}},
        "features",
        None,
        "list",
    ),
    "not a feature": (collection({"type": "Point"}), "features.0", 0, "GeoJSON Feature"),
    "no name": (collection(feature(name=None)), "features.0.properties.name", 0, "properties.name"),
    "empty name": (collection(feature(name="")), "features.0.properties.name", 0, "1 to 100"),
    "unknown kind": (
        collection(feature(kind="lawn")),
        "features.0.properties.kind",
        0,
        "work_area",
    ),
    "duplicate name": (
        collection(feature(), feature()),
        "features.1.properties.name",
        1,
        "taken by feature 0",
    ),
    "point geometry": (
        collection(feature(geometry={"type": "Point", "coordinates": [0, 0]})),
        "features.0.geometry",
        0,
        "Polygon",
    ),
    "no rings": (collection(feature(rings=[])), "features.0.geometry.coordinates", 0, "one ring"),
    "short ring": (
        collection(feature(rings=[SQUARE[:3]])),
        "features.0.geometry.coordinates.0",
        0,
        "at least 4",
    ),
    "open ring": (
        collection(feature(rings=[[*SQUARE[:4], [0.0, 0.0005]]])),
        "features.0.geometry.coordinates.0",
        0,
        "not closed",
    ),
    "latitude out of bounds": (
        collection(feature(rings=[[[0, 0], [1, 0], [1, 91], [0, 0]]])),
        "features.0.geometry.coordinates.0.2",
        0,
        "WGS84",
    ),
    "longitude out of bounds": (
        collection(feature(rings=[[[0, 0], [181, 0], [1, 1], [0, 0]]])),
        "features.0.geometry.coordinates.0.1",
        0,
        "WGS84",
    ),
    "text position": (
        collection(feature(rings=[[["0", 0], [1, 0], [1, 1], ["0", 0]]])),
        "features.0.geometry.coordinates.0.0",
        0,
        "[longitude, latitude]",
    ),
    "self-intersection": (
        collection(feature(), feature("Bowtie", rings=[BOWTIE])),
        "features.1.geometry",
        1,
        "Self-intersection",
    ),
    "too many areas": (
        collection(*(feature(f"A{i}") for i in range(MAX_AREAS + 1))),
        "features",
        None,
        "at most 200 areas",
    ),
}


@pytest.mark.parametrize(
    ("document", "field", "index", "reason"), REFUSED.values(), ids=list(REFUSED)
)
def test_refusals_name_the_feature_and_the_reason(
    document: Any, field: str, index: int | None, reason: str
) -> None:
    with pytest.raises(AreaRefusedError) as caught:
        parse_areas(document)
    assert (caught.value.field, caught.value.index) == (field, index)
    assert reason in caught.value.detail
    if index is not None:
        assert caught.value.detail.startswith(f"feature {index}")


def test_the_named_feature_is_in_the_refusal() -> None:
    with pytest.raises(AreaRefusedError) as caught:
        parse_areas(collection(feature(), feature("Bowtie", rings=[BOWTIE])))
    assert caught.value.name == "Bowtie"
    assert "'Bowtie'" in caught.value.detail


def test_at_most_ten_thousand_positions_a_site() -> None:
    ring = [[0.001 * i / 2600, 0.0] for i in range(2600)] + [
        [0.001, 0.001],
        [0.0, 0.001],
        [0.0, 0.0],
    ]
    ok = [feature(f"A{i}", rings=[ring]) for i in range(3)]
    assert len(parse_areas(collection(*ok))) == 3
    with pytest.raises(AreaRefusedError) as caught:
        parse_areas(collection(*ok, feature("A3", rings=[ring])))
    assert (caught.value.index, caught.value.name) == (3, "A3")
    assert "10000 positions" in caught.value.detail


@pytest.mark.parametrize("name", ["Europe/Berlin", "UTC", "America/Argentina/Buenos_Aires"])
def test_known_time_zones_pass(name: str) -> None:
    assert check_timezone(name) == name


@pytest.mark.parametrize("name", ["Mars/Olympus", "Europe/../etc", "", "+02:00"])
def test_unknown_time_zones_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        check_timezone(name)
    assert caught.value.field == "timezone"


def test_a_patch_changes_only_what_it_names() -> None:
    at = datetime(2026, 5, 1, tzinfo=UTC)
    site = SiteRecord(uuid.uuid4(), uuid.uuid4(), "P", "UTC", Location(lat=1, lon=2), at, at)
    assert apply_patch(site, SitePatch(timezone="Europe/Berlin")) == (
        "P",
        "Europe/Berlin",
        site.location,
    )
    with pytest.raises(InvalidRequestError):
        apply_patch(site, SitePatch())
    with pytest.raises(InvalidRequestError):
        apply_patch(site, SitePatch(timezone="Nowhere/Else"))


def test_a_body_that_is_no_json_is_refused() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        decode_document(b"{nope")
    assert caught.value.field == "body"


def test_a_number_too_large_for_a_float_is_out_of_bounds() -> None:
    ring = [[0, 0], [10**400, 0], [1, 1], [0, 0]]
    with pytest.raises(AreaRefusedError) as caught:
        parse_areas(collection(feature(rings=[ring])))
    assert "WGS84" in caught.value.detail
