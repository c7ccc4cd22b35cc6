"""``Geofences``: every site's fence and every mower's site, on every replica.

Fed from Fleet: the sites' areas (``kit/sites.py``: ``fleet.sites.areas`` at start, then
``site.areas_changed`` and ``site.removed``, the highest version kept) and each mower's
``site_id`` (``MowerRegistration``, through the Fleet seed and the mower events). A fence
is rebuilt only when its site's version grows.

``placement(state)`` is what the watch actors hand the geofence rules with each state
(``rules/geofence.py``). It runs on the actors' worker threads while the loop replaces
fences: a site's fence is replaced whole (never changed once built), so a reader sees an
old fence or a new one; a mower's site is one dictionary item, set or removed at once.
"""

from __future__ import annotations

import threading
import uuid

import structlog

from contracts.v1 import MowerRegistration, MowerState, SiteAreas
from mowdeck.kit.bus import Bus
from mowdeck.kit.sites import SiteAreasFeed
from mowdeck.notifications.ingest.fences import SiteFence
from mowdeck.notifications.rules.geofence import INSIDE, Placement

__all__ = ["Geofences"]

log = structlog.get_logger("mowdeck.notifications.ingest.geofences")


class Geofences:
    """Sites' fences by site and mowers' sites, kept by ``apply_*`` (on the loop, or the
    feed's worker threads), read by the watch actors' threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the sites' maps, written by the feed's threads
        self._fences: dict[int, SiteFence] = {}  # by site id (its int)
        self._versions: dict[int, int] = {}  # the highest version seen, removals included
        self._removed: set[int] = set()
        self._site_of: dict[int, int] = {}  # mower id (its int) -> site id (its int)

    # -- kept from Fleet ------------------------------------------------------------

    def feed(self, bus: Bus, *, timeout: float) -> SiteAreasFeed:
        """The feed of the sites' areas into these fences (started with the service)."""
        return SiteAreasFeed(
            bus, apply=self.apply_areas, remove=self.remove_site, request_timeout=timeout,
            name="notifications-site-areas",
        )  # fmt: skip

    def apply_areas(self, site: SiteAreas) -> bool:
        """A site's areas; False (ignored) when not newer than what is known, or removed.

        Safe to call from a worker thread (the feed builds fences off the loop): the fence
        is built outside the lock, the maps are replaced under it."""
        key = site.site_id.int
        if not self._newer(key, site.version):
            return False
        fence = SiteFence(site)
        with self._lock:
            if not self._newer(key, site.version):
                return False  # a newer version (or a removal) came while this one was built
            self._versions[key] = site.version
            fences = dict(self._fences)
            if fence.empty:
                fences.pop(key, None)
            else:
                fences[key] = fence
            self._fences = fences
        log.info("site areas applied", site_id=str(site.site_id), version=site.version,
                 areas=len(site.areas))  # fmt: skip
        return True

    def _newer(self, key: int, version: int) -> bool:
        return key not in self._removed and self._versions.get(key, -1) < version

    def remove_site(self, site_id: uuid.UUID) -> None:
        """A removed site: its mowers are no longer fenced; a late list cannot bring it back."""
        key = site_id.int
        with self._lock:
            self._removed.add(key)
            fences = dict(self._fences)
            fences.pop(key, None)
            self._fences = fences

    def apply_mower(self, registration: MowerRegistration) -> None:
        """A mower's site (or none) from its registration."""
        key, site = registration.mower_id.int, registration.site_id
        if site is None:
            self.forget_mower(registration.mower_id)
        else:
            self._site_of[key] = site.int

    def forget_mower(self, mower_id: uuid.UUID) -> None:
        """A removed mower, or one without a site."""
        self._site_of.pop(mower_id.int, None)

    def version(self, site_id: uuid.UUID) -> int | None:
        """The version of the site's areas applied, if any."""
        return self._versions.get(site_id.int)

    # -- read by the watch actors ------------------------------------------------------

    def placement(self, state: MowerState) -> Placement | None:
        """Where ``state`` lies against its mower's site's areas; None without a position."""
        position = state.position
        if position is None:
            return None
        site = self._site_of.get(state.mower_id.int)
        fence = None if site is None else self._fences.get(site)
        return INSIDE if fence is None else fence.place(position.lat, position.lon)
