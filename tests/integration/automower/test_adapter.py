"""The gateway's ``automower`` connection against a stand-in Automower Connect cloud."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from contracts.v1 import (
    Connection,
    EmergencyStop,
    ManualDrive,
    MowerRegistration,
    PauseMow,
    ResumeMow,
    ReturnToDock,
    SetBladeHeight,
    SetSpeed,
    StartMow,
)
from mowdeck.devices.automower import AutomowerEndpoints
from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import CommandOutcome, ConnectionAdapters, ConnectionDeps
from mowdeck.gateway.connections.automower import AutomowerConnection, account
from mowdeck.gateway.connections.credentials import Credentials
from mowdeck.gateway.connections.port import LinkDownError
from simulator.automower.standin import StandInCloud, StandInMower
from tests.support.eventually import eventually
from tests.support.links import HOSTS, Recorder, envelope

ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000acc1")
CLIENT, SECRET = "app-1", "s3cret"


@pytest.fixture
async def cloud() -> AsyncIterator[StandInCloud]:
    c = StandInCloud({CLIENT: SECRET}, rate=20.0)
    c.add(StandInMower("mower-a"))
    c.add(StandInMower("mower-b"))
    await c.start()
    yield c
    await c.stop()


@pytest.fixture
def secrets_dir(tmp_path: Path) -> Path:
    (tmp_path / "husq.json").write_text(json.dumps({"client_id": CLIENT, "client_secret": SECRET}))
    return tmp_path


@pytest.fixture
async def deps(cloud: StandInCloud, secrets_dir: Path) -> AsyncIterator[ConnectionDeps]:
    d = ConnectionDeps(
        HOSTS, Credentials(secrets_dir), automower=AutomowerEndpoints(**cloud.endpoints)
    )
    yield d
    await d.close()


def registration(vendor_id: str, credentials: str = "husq") -> MowerRegistration:
    options = {"vendor_id": vendor_id, "credentials": credentials}
    return MowerRegistration(
        mower_id=uuid.uuid4(),
        account_id=ACCOUNT,
        name=vendor_id,
        connection=Connection(kind="automower", options=options),
    )


async def opened(
    reg: MowerRegistration, deps: ConnectionDeps
) -> tuple[AutomowerConnection, Recorder]:
    rec = Recorder()
    conn = ConnectionAdapters.from_entry_points().factory("automower")(reg, rec, deps=deps)
    assert isinstance(conn, AutomowerConnection)
    await conn.open()
    return conn, rec


async def test_two_mowers_of_one_credential_share_one_login_snapshot_and_socket(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    a, rec_a = await opened(registration("mower-a"), deps)
    b, rec_b = await opened(registration("mower-b"), deps)
    await eventually(lambda: a.connected and b.connected)
    assert a.account is b.account
    assert cloud.token_requests == 1
    assert cloud.requests == [("GET", "/api/v1/mowers")]
    assert cloud.open_sockets == 1
    state = rec_a.states[-1]
    assert state.activity == "docked"
    assert state.battery == 100
    assert state.blade_height_mm == 35
    assert state.position is not None
    assert state.raw["automower.state"] == "RESTRICTED"
    # Events reach the mower they name only.
    cloud.mowers["mower-b"].battery = 42
    await cloud.push(cloud.mowers["mower-b"])
    await eventually(lambda: rec_b.states[-1].battery == 42)
    assert rec_a.states[-1].battery == 100
    await a.close()
    assert b.connected  # the account stays for its other mower
    await b.close()
    await eventually(lambda: cloud.open_sockets == 0)


@pytest.fixture
async def account_up(deps: ConnectionDeps) -> AsyncIterator[Recorder]:
    """mower-a's account link, up with its snapshot taken; what mower-a was told."""
    a, rec_a = await opened(registration("mower-a"), deps)
    await eventually(lambda: a.connected)
    yield rec_a
    assert rec_a.links == [(True, None)]  # the account stayed up throughout
    await a.close()


async def test_mowers_attached_after_their_account_came_up_get_a_snapshot_of_their_own(
    cloud: StandInCloud, deps: ConnectionDeps, account_up: Recorder
) -> None:
    cloud.add(StandInMower("mower-c"))
    # Registered later, in one go: one more snapshot for both (a still mower sends no event).
    b, rec_b = await opened(registration("mower-b"), deps)
    c, rec_c = await opened(registration("mower-c"), deps)
    await eventually(lambda: b.connected and c.connected, 10)
    assert cloud.requests == [("GET", "/api/v1/mowers")] * 2
    assert rec_b.states[-1].battery == 100 and rec_c.states[-1].activity == "docked"
    cloud.mowers["mower-b"].battery = 42
    await cloud.push(cloud.mowers["mower-b"])
    await eventually(lambda: rec_b.states[-1].battery == 42)
    for conn in (b, c):
        await conn.close()


async def test_a_late_mower_the_account_has_not_is_told_so(
    deps: ConnectionDeps, account_up: Recorder
) -> None:
    unknown, _ = await opened(registration("mower-z"), deps)
    await eventually(lambda: unknown.reason and "has no mower 'mower-z'" in unknown.reason, 10)
    assert not unknown.connected
    await unknown.close()


async def test_a_late_mower_s_failed_snapshot_is_retried_while_the_account_stays_up(
    cloud: StandInCloud, deps: ConnectionDeps, account_up: Recorder
) -> None:
    cloud.list_failures = 1
    b, rec_b = await opened(registration("mower-b"), deps)
    failed = "a new mower's snapshot failed: GET /mowers answered 503"
    await eventually(lambda: b.reason and failed in b.reason, 10)
    assert not b.connected
    await eventually(lambda: b.connected, 10)
    assert rec_b.states[-1].battery == 100
    assert cloud.requests == [("GET", "/api/v1/mowers")] * 3  # the connect's, the 503, the retry
    await b.close()


async def test_events_for_a_late_mower_while_its_snapshot_is_read_are_applied_after_it(
    cloud: StandInCloud, deps: ConnectionDeps, account_up: Recorder
) -> None:
    mower_b = cloud.mowers["mower-b"]

    async def change_after_the_snapshot() -> None:
        mower_b.battery = 42  # after the snapshot's attributes were taken (battery 100)
        await cloud.push(mower_b)

    cloud.before_list_answer = change_after_the_snapshot
    b, rec_b = await opened(registration("mower-b"), deps)
    await eventually(lambda: b.connected and rec_b.states[-1].battery == 42, 10)
    assert cloud.before_list_answer is None  # the hook ran: the snapshot said 100
    await b.close()


async def test_a_late_snapshot_answered_after_its_connect_ended_is_dropped(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    a, rec_a = await opened(registration("mower-a"), deps)
    await eventually(lambda: a.connected)
    cloud.before_list_answer = cloud.drop_sockets  # the link goes while it is answered
    b, rec_b = await opened(registration("mower-b"), deps)
    await eventually(lambda: (False, "WebSocket closed") in rec_a.links, 10)
    # The reconnect's snapshot brings both up; neither is taken down again after it.
    await eventually(lambda: a.connected and b.connected, 15)
    cloud.mowers["mower-b"].battery = 7
    await cloud.push(cloud.mowers["mower-b"])
    await eventually(lambda: rec_b.states[-1].battery == 7)
    assert b.connected and rec_b.links[-1] == (True, None)
    assert rec_a.links[-1] == (True, None)
    for conn in (a, b):
        await conn.close()


async def test_commands_are_confirmed_by_the_events_that_follow(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    reg = registration("mower-a")
    conn, rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    mower = cloud.mowers["mower-a"]
    assert await conn.send(envelope(reg, StartMow(duration_min=30)), timeout=5) == CommandOutcome(
        "executed", None
    )
    assert mower.commands[-1] == {"type": "Start", "attributes": {"duration": 30}}
    assert rec.states[-1].activity == "mowing"
    assert (await conn.send(envelope(reg, PauseMow()), timeout=5)).status == "executed"
    assert rec.states[-1].activity == "paused"
    assert (await conn.send(envelope(reg, ResumeMow()), timeout=5)).status == "executed"
    assert mower.commands[-1] == {"type": "ResumeSchedule"}
    assert (await conn.send(envelope(reg, StartMow()), timeout=5)).status == "executed"
    assert (await conn.send(envelope(reg, ReturnToDock()), timeout=5)).status == "executed"
    assert mower.commands[-1] == {"type": "ParkUntilFurtherNotice"}  # Mowdeck's calendar
    assert rec.states[-1].activity == "returning"
    assert (await conn.send(envelope(reg, SetBladeHeight(height_mm=50)), timeout=5)).status == (
        "executed"
    )
    assert mower.commands[-1] == {"type": "settings", "attributes": {"cuttingHeight": 7}}
    assert rec.states[-1].blade_height_mm == 50
    await conn.close()


async def test_what_the_api_cannot_do_is_rejected_without_a_request(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    reg = registration("mower-a")
    conn, _rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    before = len(cloud.requests)
    for command in (SetSpeed(speed_mps=0.5), ManualDrive(linear_mps=0.3, angular_rps=0.0)):
        outcome = await conn.send(envelope(reg, command), timeout=5)
        assert outcome.status == "rejected"
        assert outcome.reason is not None
        assert "Automower Connect API (connection kind automower)" in outcome.reason
    assert len(cloud.requests) == before
    await conn.close()


async def test_a_command_the_mower_does_not_follow_fails_at_its_expiry(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    reg = registration("mower-a")
    conn, _rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    mower = cloud.mowers["mower-a"]
    mower.deaf = True
    await asyncio.sleep(account.REQUEST_INTERVAL_SECONDS)  # the limiter free after the snapshot

    async def keep_reporting() -> None:
        while True:
            await asyncio.sleep(0.2)
            await cloud.push(mower)

    reporter = asyncio.create_task(keep_reporting())
    try:
        outcome = await conn.send(envelope(reg, StartMow(), ttl=1.0), timeout=5)
    finally:
        reporter.cancel()
    assert outcome.status == "failed"
    assert outcome.reason == (
        "the mower still reports PARKED_IN_CS/RESTRICTED before the command expired after Start"
    )
    await conn.close()


async def test_an_emergency_stop_goes_ahead_of_the_queue_and_waits_for_the_stop(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    reg = registration("mower-a")
    conn, rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    assert (await conn.send(envelope(reg, StartMow()), timeout=5)).status == "executed"
    account = conn.account
    assert account is not None
    account.limiter.hold(30)  # the budget is spent for half a minute
    started = time.monotonic()
    outcome = await conn.send(envelope(reg, EmergencyStop()), timeout=5)
    assert outcome == CommandOutcome("executed", None)
    assert time.monotonic() - started < 2
    assert cloud.mowers["mower-a"].commands[-1] == {"type": "Pause"}
    assert rec.states[-1].activity == "paused"
    # Already stopped: executed without a request.
    before = len(cloud.requests)
    again = await conn.send(envelope(reg, EmergencyStop()), timeout=5)
    assert again.status == "executed"
    assert len(cloud.requests) == before
    await conn.close()


async def test_a_429_is_waited_out_as_its_retry_after_says(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    cloud.rate = 0.5  # the stand-in takes one request every 2 s; the link sends one a second
    reg = registration("mower-a")
    conn, _rec = await opened(reg, deps)
    await eventually(lambda: conn.connected, 10)
    await asyncio.sleep(2.1)
    assert (await conn.send(envelope(reg, StartMow()), timeout=10)).status == "executed"
    assert (await conn.send(envelope(reg, PauseMow()), timeout=10)).status == "executed"
    assert cloud.throttled >= 1
    assert [r[0] for r in cloud.requests] == ["GET", "POST", "POST"]
    await conn.close()


async def test_requests_at_the_vendor_s_limit_are_never_answered_429(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    cloud.rate = 1.0  # the vendor's one request a second
    reg = registration("mower-a")
    conn, _rec = await opened(reg, deps)
    await eventually(lambda: conn.connected, 10)
    # Commands at once after the snapshot, each spaced by the limiter only.
    for command in (StartMow(), PauseMow(), ResumeMow()):
        assert (await conn.send(envelope(reg, command), timeout=10)).status == "executed"
    assert [r[0] for r in cloud.requests] == ["GET", "POST", "POST", "POST"]
    assert cloud.throttled == 0
    await conn.close()


async def test_the_token_is_renewed_before_it_expires(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    cloud.expires_in = 2
    reg = registration("mower-a")
    conn, _rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    await eventually(lambda: cloud.token_requests >= 3, 10)
    assert conn.connected
    assert (await conn.send(envelope(reg, StartMow()), timeout=5)).status == "executed"
    await conn.close()


async def test_a_dropped_socket_reconnects_with_a_new_snapshot(
    cloud: StandInCloud, deps: ConnectionDeps
) -> None:
    reg = registration("mower-a")
    conn, rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    cloud.mowers["mower-a"].battery = 12  # changed while no event says so
    await cloud.drop_sockets()
    await eventually(lambda: (False, "WebSocket closed") in rec.links)
    with pytest.raises(LinkDownError):
        await conn.send(envelope(reg, StartMow()), timeout=1)
    await eventually(lambda: conn.connected and rec.states[-1].battery == 12, 10)
    assert [r for r in cloud.requests if r[0] == "GET"] == [("GET", "/api/v1/mowers")] * 2
    await conn.close()


async def test_a_link_that_cannot_come_up_says_why(
    cloud: StandInCloud, deps: ConnectionDeps, secrets_dir: Path
) -> None:
    missing, _ = await opened(registration("mower-a", credentials="nope"), deps)
    unknown, _ = await opened(registration("mower-z"), deps)
    await eventually(lambda: missing.reason and "nope.json does not exist" in missing.reason)
    await eventually(lambda: unknown.reason and "has no mower 'mower-z'" in unknown.reason)
    assert not missing.connected
    assert not unknown.connected
    (secrets_dir / "wrong.json").write_text(json.dumps({"client_id": CLIENT, "client_secret": "x"}))
    wrong, _ = await opened(registration("mower-b", credentials="wrong"), deps)
    await eventually(lambda: wrong.reason and "answered 401" in wrong.reason)
    for conn in (missing, unknown, wrong):
        await conn.close()


async def test_cloud_hosts_not_allowed_are_not_dialled(
    cloud: StandInCloud, secrets_dir: Path
) -> None:
    deps = ConnectionDeps(
        DeviceHosts(["10.0.0.0/8"]),
        Credentials(secrets_dir),
        automower=AutomowerEndpoints(**cloud.endpoints),
    )
    conn, _ = await opened(registration("mower-a"), deps)
    await eventually(lambda: conn.reason and "MOWDECK_GATEWAY_DEVICE_HOSTS" in conn.reason)
    assert cloud.token_requests == 0
    await conn.close()
    await deps.close()


async def test_a_token_that_cannot_be_renewed_ends_the_link_until_the_secret_works(
    cloud: StandInCloud, deps: ConnectionDeps, secrets_dir: Path
) -> None:
    cloud.expires_in = 2
    reg = registration("mower-a")
    conn, rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    cloud.clients[CLIENT] = "rotated"  # the application's secret changed at the vendor
    await eventually(lambda: not conn.connected, 10)
    assert rec.links[-1][0] is False
    assert "token renewal failed: the token endpoint answered 401" in str(rec.links[-1][1])
    (secrets_dir / "husq.json").write_text(
        json.dumps({"client_id": CLIENT, "client_secret": "rotated"})
    )
    await eventually(lambda: conn.connected, 15)
    await conn.close()


async def test_a_socket_that_answers_no_ping_is_ended_and_redialled(
    cloud: StandInCloud, deps: ConnectionDeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(account, "PING_SECONDS", 0.3)
    monkeypatch.setattr(account, "PONG_SECONDS", 0.3)
    reg = registration("mower-a")
    conn, rec = await opened(reg, deps)
    await eventually(lambda: conn.connected)
    await asyncio.sleep(1.0)  # pings answered: still the first connect
    assert rec.links == [(True, None)]
    cloud.mute = True
    await eventually(lambda: not conn.connected, 5)
    assert rec.links[-1] == (False, "automower account 'husq': no answer to ping in 0.3 s")
    cloud.mute = False
    await eventually(lambda: conn.connected, 10)
    await conn.close()
