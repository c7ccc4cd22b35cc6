"""Fleet: the mower registry, its events, the shard list and issuing commands."""

from mowdeck.fleet.errors import (
    FleetError,
    InvalidRequestError,
    MowerExistsError,
    MowerNotFoundError,
    VersionConflictError,
)
from mowdeck.fleet.service import FleetService
from mowdeck.fleet.settings import FleetSettings, load_fleet_settings

__all__ = [
    "FleetError",
    "FleetService",
    "FleetSettings",
    "InvalidRequestError",
    "MowerExistsError",
    "MowerNotFoundError",
    "VersionConflictError",
    "load_fleet_settings",
]
