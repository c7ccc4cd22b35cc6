"""Pure rules of sites: the time zone, a patch, and a site's areas as GeoJSON.

``parse_areas`` checks, in this order, and refuses with the first reason found:

1. the document is a ``FeatureCollection`` of at most ``MAX_AREAS`` features;
2. each feature is a ``Feature`` with ``properties.name`` (1 to 100 characters, unique in
   the collection) and ``properties.kind`` (``work_area`` or ``stay_out``);
3. its geometry is a ``Polygon``: rings of at least four ``[lon, lat]`` positions (an
   altitude is dropped), in WGS84 bounds, each ring closed;
4. the polygon is valid by OGC rules (shapely: no self-intersection, holes inside);
5. the collection holds at most ``MAX_VERTICES`` positions in all.
"""

from __future__ import annotations

import math
import zoneinfo
from typing import Any, NoReturn

import msgspec
import shapely
from shapely.geometry import Polygon
from shapely.validation import explain_validity

from contracts.v1 import AREA_KINDS, Area
from mowdeck.fleet.errors import AreaRefusedError, InvalidRequestError
from mowdeck.fleet.sites.model import SitePatch, SiteRecord

__all__ = [
    "MAX_AREAS",
    "MAX_VERTICES",
    "apply_patch",
    "check_timezone",
    "decode_document",
    "parse_areas",
]

MAX_AREAS = 200
MAX_VERTICES = 10_000
_NAME_MAX = 100


def check_timezone(name: str, field: str = "timezone") -> str:
    """``name`` if it is an IANA time zone this system knows, else a 422 naming ``field``."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidRequestError(
            field, f"`{field}`: {name!r} is not an IANA time zone (e.g. Europe/Berlin)"
        ) from None
    return name


def apply_patch(current: SiteRecord, patch: SitePatch) -> tuple[str, str, Any]:
    """The name, time zone and location after ``patch``; refuses an empty patch."""
    if patch.name is None and patch.timezone is None and patch.location is None:
        raise InvalidRequestError("body", "send `name`, `timezone`, `location` or some of them")
    timezone = current.timezone if patch.timezone is None else check_timezone(patch.timezone)
    return (
        current.name if patch.name is None else patch.name,
        timezone,
        current.location if patch.location is None else patch.location,
    )


def _refuse(
    detail: str, index: int | None = None, name: str | None = None, at: str = ""
) -> NoReturn:
    field = "features" if index is None else f"features.{index}{at}"
    who = "" if index is None else f"feature {index}" + (f" ({name!r})" if name else "") + ": "
    raise AreaRefusedError(field, who + detail, index, name)


def _position(raw: Any, index: int, name: str, at: str) -> tuple[float, float]:
    if (
        not isinstance(raw, list)
        or len(raw) not in (2, 3)
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw)
    ):
        _refuse("a position is [longitude, latitude]", index, name, at)
    try:
        lon, lat = float(raw[0]), float(raw[1])
    except OverflowError:  # a whole number too large for a float
        lon = lat = math.inf
    if not (math.isfinite(lon) and math.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90):
        _refuse(f"position [{raw[0]}, {raw[1]}] is outside WGS84 bounds", index, name, at)
    return lon, lat


def _rings(geometry: Any, index: int, name: str) -> list[list[tuple[float, float]]]:
    if not isinstance(geometry, dict) or geometry.get("type") != "Polygon":
        _refuse("the geometry must be a Polygon", index, name, ".geometry")
    coordinates = geometry.get("coordinates")
    if not isinstance(coordinates, list) or not coordinates:
        _refuse("a Polygon needs at least one ring", index, name, ".geometry.coordinates")
    rings = []
    for r, ring in enumerate(coordinates):
        at = f".geometry.coordinates.{r}"
        if not isinstance(ring, list) or len(ring) < 4:
            _refuse(f"ring {r} needs at least 4 positions", index, name, at)
        positions = [_position(p, index, name, f"{at}.{i}") for i, p in enumerate(ring)]
        if positions[0] != positions[-1]:
            _refuse(
                f"ring {r} is not closed (its last position must equal its first)", index, name, at
            )
        rings.append(positions)
    return rings


def _properties(feature: Any, index: int) -> tuple[str, str]:
    if not isinstance(feature, dict) or feature.get("type") != "Feature":
        _refuse("must be a GeoJSON Feature", index)
    properties = feature.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    name = properties.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= _NAME_MAX:
        _refuse(
            "`properties.name` must be text of 1 to 100 characters", index, None, ".properties.name"
        )
    kind = properties.get("kind")
    if kind not in AREA_KINDS:
        _refuse(
            f"`properties.kind` must be one of {', '.join(AREA_KINDS)}",
            index,
            name,
            ".properties.kind",
        )
    return name, kind


def parse_areas(document: Any) -> list[Area]:
    """The areas of a GeoJSON FeatureCollection, or ``AreaRefusedError`` naming the feature."""
    if not isinstance(document, dict) or document.get("type") != "FeatureCollection":
        _refuse("the body must be a GeoJSON FeatureCollection")
    features = document.get("features")
    if not isinstance(features, list):
        _refuse("`features` must be a list")
    if len(features) > MAX_AREAS:
        _refuse(f"a site holds at most {MAX_AREAS} areas, not {len(features)}")
    areas: list[Area] = []
    seen: dict[str, int] = {}
    vertices = 0
    for index, feature in enumerate(features):
        name, kind = _properties(feature, index)
        if name in seen:
            _refuse(f"the name is taken by feature {seen[name]}", index, name, ".properties.name")
        seen[name] = index
        rings = _rings(feature.get("geometry"), index, name)
        polygon = Polygon(rings[0], rings[1:])
        if not shapely.is_valid(polygon):
            _refuse(f"invalid polygon: {explain_validity(polygon)}", index, name, ".geometry")
        vertices += sum(len(ring) for ring in rings)
        if vertices > MAX_VERTICES:
            _refuse(f"the site's areas exceed {MAX_VERTICES} positions in all", index, name)
        areas.append(Area(name=name, kind=kind, rings=rings))  # type: ignore[arg-type]
    return areas


def decode_document(body: bytes) -> Any:
    """The JSON of a request body, or a 400 ``InvalidRequestError``."""
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as err:
        raise InvalidRequestError("body", f"the body is not JSON: {err}") from None
