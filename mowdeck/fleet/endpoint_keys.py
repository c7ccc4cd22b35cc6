"""At start: the endpoint keys of mowers stored before Fleet kept them (0005_endpoint_keys.sql)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import structlog

from contracts.v1 import MowerRegistration
from mowdeck.devices.endpoints import EndpointPolicy
from mowdeck.fleet import rules
from mowdeck.fleet.errors import FleetError
from mowdeck.fleet.ports import EndpointClash, MowerRepository, RegistryEvent

__all__ = ["assign_endpoint_keys"]

log = structlog.get_logger("mowdeck.fleet")
_ATTEMPTS = 3


async def assign_endpoint_keys(
    repository: MowerRepository, endpoints: EndpointPolicy, *, clock: Callable[[], datetime]
) -> list[EndpointClash]:
    """Fill in the keys, earliest registration first; log every mower left without its
    endpoint (not linkable: no gateway dials it)."""

    def updated(registration: MowerRegistration) -> RegistryEvent:
        return rules.registry_event("mower.updated", registration, now=clock())

    attempt = 1
    while True:
        try:
            clashes = await repository.assign_endpoint_keys(endpoints.key, updated)
        except FleetError as err:
            # Another replica's registration may take a key between the read and the
            # write; the next attempt reads it as held.
            if attempt == _ATTEMPTS:
                raise
            log.warning("endpoint keys not assigned; trying again", attempt=attempt, error=str(err))
            attempt += 1
        else:
            break
    for clash in clashes:
        log.warning(
            "mower not linkable: an earlier registration holds its device endpoint",
            mower_id=str(clash.mower_id),
            holder=str(clash.holder),
            hint="give it another connection (PATCH) or remove one of the two",
        )
    return clashes
