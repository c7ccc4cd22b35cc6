"""Fleet's start fills in endpoint keys: earliest first, clashes logged, a failure retried."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog

from contracts.v1 import Connection, MowerRegistration
from mowdeck.devices.endpoints import DeviceHosts, EndpointPolicy
from mowdeck.fleet.endpoint_keys import assign_endpoint_keys
from mowdeck.fleet.errors import FleetError
from mowdeck.fleet.memory import InMemoryMowerRepository
from mowdeck.fleet.ports import EndpointClash, MowerRecord
from mowdeck.fleet.rules import registry_event

NOW = datetime(2026, 5, 1, tzinfo=UTC)
POLICY = EndpointPolicy(DeviceHosts(["h"]), {"simulator": "url"})


class Failing(InMemoryMowerRepository):
    """Fails the first ``failures`` calls, as a replica's insert racing the write would."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def assign_endpoint_keys(self, *args: Any) -> list[EndpointClash]:
        if self.failures:
            self.failures -= 1
            raise FleetError("could not serialize")
        return await super().assign_endpoint_keys(*args)


async def _stored_before(repo: InMemoryMowerRepository, url: str, at: datetime) -> uuid.UUID:
    reg = MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=uuid.uuid4(),
        name="m",
        connection=Connection(kind="simulator", options={"url": url}),
    )
    await repo.add(MowerRecord(reg, at, at), registry_event("mower.registered", reg, now=at))
    return reg.mower_id


@pytest.mark.parametrize("failures", [0, 2], ids=["first-time", "after-two-failures"])
async def test_the_earliest_keeps_the_endpoint_and_the_later_is_logged(failures: int) -> None:
    repo = Failing(failures)
    later = await _stored_before(repo, "WS://H/x", NOW + timedelta(seconds=1))
    earlier = await _stored_before(repo, "ws://h:80/x", NOW)
    with structlog.testing.capture_logs() as logs:
        clashes = await assign_endpoint_keys(repo, POLICY, clock=lambda: NOW)
    assert clashes == [EndpointClash(later, earlier)]
    assert (await repo.get(earlier)).endpoint_key == "simulator ws://h:80/x"  # type: ignore[union-attr]
    [logged] = [e for e in logs if e["event"].startswith("mower not linkable")]
    assert (logged["mower_id"], logged["holder"]) == (str(later), str(earlier))
    assert len([e for e in logs if e["event"].endswith("trying again")]) == failures


async def test_a_store_that_keeps_failing_fails_the_start() -> None:
    with pytest.raises(FleetError):
        await assign_endpoint_keys(Failing(3), POLICY, clock=lambda: NOW)
