"""``mowdeck demo``: every service and simulated mowers in one process, on embedded servers.

Without ``MOWDECK_NATS_URL`` an embedded NATS server is started, without
``MOWDECK_DATABASE_URL`` an embedded PostgreSQL; both are removed again on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import asyncpg
import msgspec
import structlog

from mowdeck.authn import TokenIssuer, load_auth_settings
from mowdeck.authz import AuthzSettings, LocalAuthorizer, PostgresTupleStore
from mowdeck.authz.roles import grant_tuples
from mowdeck.demo_scenario import run_scenario
from mowdeck.errors import MowdeckError
from mowdeck.fleet.service import FleetService
from mowdeck.fleet.settings import load_fleet_settings
from mowdeck.gateway.service import GatewayService
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.bus import Bus
from mowdeck.kit.embedded import EmbeddedNats, EmbeddedPostgres
from mowdeck.kit.lifecycle import Service, start_all, stop_all
from mowdeck.kit.logging import configure_logging
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.settings import BaseSettings, load_settings
from mowdeck.notifications.postgres import PostgresNotificationStore
from mowdeck.notifications.preferences import Preferences
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import load_notifications_settings
from mowdeck.notifications.targets import LogTarget
from mowdeck.telemetry.cli import freezing_service
from mowdeck.telemetry.settings import load_telemetry_settings
from simulator import FleetConfig, SimulatorServer
from simulator.cli import register

__all__ = ["Demo", "DemoError", "configure", "run"]

log = structlog.get_logger("mowdeck.demo")

DEMO_ACCOUNT = uuid.UUID("00000000-0000-4000-8000-00000000de30")
DEMO_USER = "demo"
SERVICES = ["authz", "fleet", "telemetry", "notifications"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck demo``."""
    parser.add_argument("--mowers", type=int, default=20, help="simulated mowers (default 20)")
    parser.add_argument(
        "--speed", type=float, default=10.0, help="simulated seconds per second (default 10)"
    )
    parser.add_argument("--seed", type=int, default=1, help="reproducible mowers")
    parser.add_argument("--host", default="127.0.0.1", help="address every service listens on")
    parser.add_argument(
        "--port",
        type=int,
        default=8080,
        help="Fleet's port; Telemetry, the gateway and the simulator use the "
        "next ones (0: free ports)",
    )


@dataclass
class Demo:
    """What a running demo is made of."""

    token: str
    fleet_url: str
    telemetry_url: str
    notifications_url: str
    gateway_url: str
    sim_url: str
    mowers: list[uuid.UUID]
    services: list[Service] = field(default_factory=list)


def _port(base: int, offset: int) -> int:
    return 0 if base == 0 else base + offset


@contextlib.asynccontextmanager
async def running_demo(args: argparse.Namespace) -> AsyncIterator[Demo]:
    """Start everything; stop it all and remove what was started on exit."""
    async with contextlib.AsyncExitStack() as stack:
        # Each server's removal is registered before its start: a start that fails or is
        # interrupted half way still leaves no process and no temp folder behind.
        nats_url = os.environ.get("MOWDECK_NATS_URL")
        if not nats_url:
            nats = EmbeddedNats()
            stack.callback(nats.close)
            nats.start()
            nats_url = nats.url
        database_url = os.environ.get("MOWDECK_DATABASE_URL")
        if not database_url:
            pg = EmbeddedPostgres()
            stack.callback(pg.close)
            await _in_thread(pg.start)
            database_url = pg.url
        # Development: the demo's own simulator, on whichever port it gets.
        device_hosts = os.environ.get("MOWDECK_GATEWAY_DEVICE_HOSTS") or json.dumps([args.host])
        env = {
            "MOWDECK_NATS_URL": nats_url,
            "MOWDECK_DATABASE_URL": database_url,
            "MOWDECK_HTTP_HOST": args.host,
            "MOWDECK_GATEWAY_DEVICE_HOSTS": device_hosts,
            # Development: a VAPID key made on first start (kept under .mowdeck/), and the
            # log channel for the demo user's target.
            "MOWDECK_NOTIFICATIONS_CHANNELS": os.environ.get(
                "MOWDECK_NOTIFICATIONS_CHANNELS", '["webpush", "ntfy", "log"]'
            ),
            "MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE": os.environ.get(
                "MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE", ".mowdeck/vapid-demo.pem"
            ),
            "MOWDECK_NOTIFICATIONS_VAPID_SUBJECT": os.environ.get(
                "MOWDECK_NOTIFICATIONS_VAPID_SUBJECT", "mailto:demo@mowdeck.invalid"
            ),
        }
        await migrate(database_url, discover(sql_root(), SERVICES))

        auth = load_auth_settings()
        if not (auth.jwt_secret or auth.jwt_key_file or auth.jwt_jwks_file):
            # Development only: a fresh HS256 secret for this run.
            auth = msgspec.structs.replace(auth, jwt_secret=secrets.token_urlsafe(32))
        token = TokenIssuer(auth).mint(DEMO_USER, DEMO_ACCOUNT, ttl_s=24 * 3600)
        authz = AuthzSettings(authz="local")

        pool = await asyncpg.create_pool(database_url, min_size=1, max_size=10)
        stack.push_async_callback(pool.close)
        authorizer = LocalAuthorizer(PostgresTupleStore(pool))
        await authorizer.write(grant_tuples(DEMO_ACCOUNT, DEMO_USER, "admin"))
        # The services share this bus; the gateway's emergency lane connects on its own.
        fast_path = load_settings(BaseSettings, {**os.environ, **env}).nats_fast_path
        bus = await Bus.connect(nats_url, name="demo", fast_path=fast_path)
        stack.push_async_callback(bus.drain)

        fleet = FleetService(
            load_fleet_settings(
                {**os.environ, **env, "MOWDECK_HTTP_PORT": str(_port(args.port, 0))}
            ),
            auth_settings=auth,
            authz_settings=authz,
            bus=bus,
            pool=pool,
            authorizer=authorizer,
        )
        telemetry = freezing_service(  # as `mowdeck telemetry` runs it
            load_telemetry_settings(
                {**os.environ, **env, "MOWDECK_HTTP_PORT": str(_port(args.port, 1))}
            ),
            auth_settings=auth,
            authz_settings=authz,
            bus=bus,
            pool=pool,
            authorizer=authorizer,
        )
        notifications = NotificationsService(
            load_notifications_settings(
                {**os.environ, **env, "MOWDECK_HTTP_PORT": str(_port(args.port, 3))}
            ),
            auth_settings=auth,
            authz_settings=authz,
            bus=bus,
            pool=pool,
            authorizer=authorizer,
        )
        # The demo user hears about every mower of the account.
        demo_store = PostgresNotificationStore(pool)
        await demo_store.put_preferences(DEMO_USER, DEMO_ACCOUNT, Preferences(scope="all"))
        # ... and gets each one delivered as a log line of this process (the log channel).
        if not await demo_store.list_targets(DEMO_USER):
            await demo_store.add_target(DEMO_USER, LogTarget())
        gateway = GatewayService(
            GatewaySettings(
                nats_url=nats_url,
                nats_fast_path=fast_path,
                http_host=args.host,
                http_port=_port(args.port, 2),
                gateway_device_hosts=json.loads(device_hosts),
            ),
            bus=bus,
        )
        sim = SimulatorServer(
            FleetConfig(
                mowers=args.mowers,
                account_id=DEMO_ACCOUNT,
                seed=args.seed,
                speed=args.speed,
                autostart=False,
            ),
            host=args.host,
            port=_port(args.port, 10),
        )
        try:
            services: list[Service] = await start_all(
                [fleet, telemetry, notifications, gateway, _Sim(sim)]
            )
        except OSError as err:
            # Mostly a port in use: say which, without a traceback.
            raise DemoError(f"cannot start the services: {err.strerror or err}") from err
        stack.push_async_callback(stop_all, services, timeout=30.0)
        failed = await register(fleet.url, sim.registrations(), token=token)
        if failed:
            log.warning("some simulated mowers were not registered", failed=failed)
        scenario = asyncio.get_running_loop().create_task(
            run_scenario(bus, sim, DEMO_ACCOUNT), name="demo-scenario"
        )
        stack.push_async_callback(_cancel, scenario)
        yield Demo(
            token=token,
            fleet_url=fleet.url,
            telemetry_url=telemetry.url,
            notifications_url=notifications.url,
            gateway_url=gateway.url,
            sim_url=sim.url,
            mowers=[r.mower_id for r in sim.registrations()],
            services=services,
        )


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


class DemoError(MowdeckError):
    """The demo could not start."""


async def _in_thread(func: Callable[[], None]) -> None:
    """Run blocking ``func`` in a thread; when cancelled, let it finish before re-raising.

    A thread cannot be interrupted: returning at once would run the cleanup beside it.
    """
    task = asyncio.ensure_future(asyncio.to_thread(func))
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise


class _Sim:
    """The simulator as a service of the demo."""

    name = "simulator"

    def __init__(self, server: SimulatorServer) -> None:
        self.server = server

    async def start(self) -> None:
        await self.server.start()

    async def stop(self) -> None:
        await self.server.stop()


def banner(demo: Demo) -> str:
    """What to print for a person: the token, the URLs and commands to paste."""
    m = demo.mowers[0] if demo.mowers else uuid.UUID(int=0)
    cmd = f"{demo.fleet_url}/v1/mowers/{m}/commands?wait=10"
    json_body = "-H 'Content-Type: application/json' -d"
    return f"""
Mowdeck demo is running with {len(demo.mowers)} simulated mowers.

  Fleet      {demo.fleet_url}
  Telemetry  {demo.telemetry_url}
  Notifications {demo.notifications_url}
  Gateway    {demo.gateway_url}/metrics
  Simulator  {demo.sim_url}/sim/mowers

Development token (user "{DEMO_USER}", account {DEMO_ACCOUNT}, admin):
  export TOKEN={demo.token}
  export AUTH="Authorization: Bearer $TOKEN"

Try:
  curl -s {demo.fleet_url}/v1/mowers -H "$AUTH"
  curl -s -X POST "{cmd}" -H "$AUTH" {json_body} '{{"command": {{"kind": "start_mow"}}}}'
  curl -s {demo.telemetry_url}/v1/mowers/{m}/state -H "$AUTH"
  curl -s "{demo.telemetry_url}/v1/mowers/{m}/history?step=1m" -H "$AUTH"
  curl -s "{demo.telemetry_url}/v1/mowers/{m}/track" -H "$AUTH"
  curl -s -X POST "{cmd}" -H "$AUTH" {json_body} '{{"command": {{"kind": "emergency_stop"}}}}'
  curl -s {demo.sim_url}/sim/mowers/{m}

Notifications: user "{DEMO_USER}" is subscribed to all mowers. Within a few minutes a
short job finishes, a mower runs low on battery and one gets stuck (an injected fault):
  curl -s {demo.notifications_url}/v1/notifications/inbox -H "$AUTH"
  curl -s {demo.notifications_url}/metrics | grep mowdeck_notifications_events_total

Ctrl-C stops everything and removes what the demo started.
"""


async def run(args: argparse.Namespace) -> int:
    """Run the demo until Ctrl-C or SIGTERM."""
    configure_logging(
        os.environ.get("MOWDECK_LOG_LEVEL", "warning"),
        "console" if os.environ.get("MOWDECK_LOG_FORMAT") is None else "json",
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    started = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        # The start can wait long (NATS or PostgreSQL not reachable yet): a signal meanwhile
        # cancels it, and what had started is stopped and removed again.
        serving = asyncio.ensure_future(_serve(args, stop, started))
        signalled = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({serving, signalled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            signalled.cancel()
        if not serving.done() and not started.is_set():
            print("stopping while starting...", flush=True)
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        else:
            await serving
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("stopped.", flush=True)
    return 0


async def _serve(args: argparse.Namespace, stop: asyncio.Event, started: asyncio.Event) -> None:
    async with running_demo(args) as demo:
        print(banner(demo), flush=True)
        started.set()
        await stop.wait()
        print("stopping...", flush=True)
