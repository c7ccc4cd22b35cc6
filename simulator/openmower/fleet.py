"""Stand-in OpenMowers on one broker, each under its own prefix, with their registrations.

``mowdeck sim --protocol openmower`` runs them, so that a fleet of mowers speaking
OpenMower's MQTT interface can be linked without hardware.
"""

from __future__ import annotations

import asyncio
import random
import uuid

import yarl

from contracts.v1 import Connection, MowerRegistration
from simulator.openmower.protocol import ACTION_START
from simulator.openmower.standin import StandInOpenMower

__all__ = ["OpenMowerFleet"]

# Where the stand-ins' map origin is (a park in Munich), as the registrations' datum.
DATUM = {"lat": 48.1642, "lon": 11.6052}


class OpenMowerFleet:
    """``mowers`` stand-ins on ``broker`` (``mqtt://host:port``)."""

    def __init__(
        self,
        broker: str,
        mowers: int,
        *,
        account_id: uuid.UUID | None = None,
        seed: int | None = None,
        period: float = 0.5,
    ) -> None:
        url = yarl.URL(broker)
        if url.scheme != "mqtt" or not url.host or url.port is None:
            raise ValueError(f"expected mqtt://HOST:PORT, got {broker!r}")
        rng = random.Random(seed)
        self.broker = f"mqtt://{url.host}:{url.port}"
        self.account_id = account_id or uuid.UUID(int=rng.getrandbits(128), version=4)
        self.ids = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(mowers)]
        self.mowers = {
            mower_id: StandInOpenMower(
                url.host, url.port, prefix=f"mowdeck-sim/{mower_id}/", period=period
            )
            for mower_id in self.ids
        }

    async def start(self, *, autostart: bool = False) -> None:
        """Connect every stand-in; with ``autostart`` each starts mowing."""
        await asyncio.gather(*(m.start() for m in self.mowers.values()))
        if autostart:
            for mower in self.mowers.values():
                await mower.obey(ACTION_START)

    async def stop(self) -> None:
        """Disconnect every stand-in."""
        await asyncio.gather(*(m.stop() for m in self.mowers.values()))

    def registrations(self) -> list[MowerRegistration]:
        """The mowers as Fleet registers them (kind ``openmower``)."""
        return [
            MowerRegistration(
                mower_id=mower_id,
                account_id=self.account_id,
                name=f"OpenMower {i + 1}",
                connection=Connection(
                    kind="openmower",
                    options={
                        "broker": self.broker,
                        "prefix": self.mowers[mower_id].topics.prefix,
                        "datum": DATUM,
                    },
                ),
            )
            for i, mower_id in enumerate(self.ids)
        ]
