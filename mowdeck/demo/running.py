"""A running demo: every service and simulated mowers in one process, on embedded servers.

Without ``MOWDECK_NATS_URL`` an embedded NATS server is started (one user per service,
each service on its own connection: ``bus.py``), without ``MOWDECK_DATABASE_URL`` an
embedded PostgreSQL; both are removed again on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import msgspec
import structlog

from mowdeck.authn import AuthSettings, TokenIssuer
from mowdeck.authz import AuthzSettings, LocalAuthorizer, PostgresTupleStore
from mowdeck.authz.roles import grant_tuples
from mowdeck.demo.addresses import console_origins
from mowdeck.demo.addresses import device_hosts as demo_device_hosts
from mowdeck.demo.auth import DEMO_ACCOUNT, DEMO_USER, demo_auth
from mowdeck.demo.banner import ready_mower
from mowdeck.demo.brands import Brands, brand_counts, plan_brands
from mowdeck.demo.bus import DemoBus, start_demo_nats
from mowdeck.demo.scenario import run_scenario
from mowdeck.demo.site import demo_site
from mowdeck.errors import MowdeckError
from mowdeck.fleet.service import FleetService
from mowdeck.fleet.settings import load_fleet_settings
from mowdeck.gateway.service import GatewayService
from mowdeck.gateway.settings import GatewaySettings
from mowdeck.kit.allocator import tuned_process
from mowdeck.kit.bus import Bus
from mowdeck.kit.embedded import EmbeddedPostgres
from mowdeck.kit.lifecycle import Service, start_all, stop_all
from mowdeck.kit.logging import bound
from mowdeck.kit.migrate import discover, migrate, sql_root
from mowdeck.kit.pg import session_settings
from mowdeck.kit.ports import free_port
from mowdeck.kit.settings import BaseSettings, load_settings
from mowdeck.notifications.postgres import PostgresNotificationStore
from mowdeck.notifications.preferences import Preferences
from mowdeck.notifications.service import NotificationsService
from mowdeck.notifications.settings import load_notifications_settings
from mowdeck.notifications.targets import LogTarget
from mowdeck.realtime.console import OneTimeCodes
from mowdeck.realtime.service import RealtimeService
from mowdeck.realtime.settings import load_realtime_settings
from mowdeck.telemetry.cli import freezing_service
from mowdeck.telemetry.service import TelemetryService
from mowdeck.telemetry.settings import load_telemetry_settings
from simulator import FleetConfig, SimulatorServer
from simulator.cli import register

__all__ = ["Demo", "DemoError", "running_demo"]

log = structlog.get_logger("mowdeck.demo")

SERVICES = ["authz", "fleet", "telemetry", "notifications"]


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
    console_url: str = ""
    # The mower the banner's examples command, and why it would wait (charging), if so.
    example: uuid.UUID | None = None
    example_waits: str = ""
    key_file: str = ""
    services: list[Service] = field(default_factory=list)
    realtime_url: str = ""
    # The embedded NATS and its users (None: a configured server, one shared connection).
    nats: DemoBus | None = None
    # `mowdeck demo --prometheus`: its URL and how many rule files it loaded.
    prometheus_url: str = ""
    prometheus_rules: int = 0
    # The mowers of other brands (OpenMower, Automower) and how they are reached.
    brands: Brands | None = None
    # The demo's site (``demo/site.py``), when Fleet made it.
    site_id: uuid.UUID | None = None

    def metrics_urls(self) -> dict[str, str]:
        """Each service's base URL by job name; each serves ``/metrics``."""
        return {
            "fleet": self.fleet_url,
            "telemetry": self.telemetry_url,
            "gateway": self.gateway_url,
            "notifications": self.notifications_url,
            "realtime": self.realtime_url,
            "simulator": self.sim_url,
        }


def _port(base: int, offset: int) -> int:
    return 0 if base == 0 else base + offset


async def _subscribe_demo_user(store: PostgresNotificationStore) -> None:
    # The demo user hears about every mower of the account, each notification delivered
    # as a log line of this process (the log channel).
    await store.put_preferences(DEMO_USER, DEMO_ACCOUNT, Preferences(scope="all"))
    if not await store.list_targets(DEMO_USER):
        await store.add_target(DEMO_USER, LogTarget())


def _realtime(
    environ: dict[str, str],
    services: tuple[FleetService, TelemetryService, NotificationsService],
    codes: OneTimeCodes,
    *,
    auth: AuthSettings,
    authz: AuthzSettings,
    bus: Bus | None,
    authorizer: LocalAuthorizer,
) -> RealtimeService:
    # Realtime reads the states the stream no longer holds from Telemetry's tables, on a
    # pool of its own; its console calls the APIs started before.
    fleet, telemetry, notifications = services
    console = {
        "MOWDECK_REALTIME_TELEMETRY_DATABASE": "true",
        "MOWDECK_REALTIME_CONSOLE_FLEET_URL": fleet.url,
        "MOWDECK_REALTIME_CONSOLE_TELEMETRY_URL": telemetry.url,
        "MOWDECK_REALTIME_CONSOLE_NOTIFICATIONS_URL": notifications.url,
    }
    return RealtimeService(
        load_realtime_settings({**environ, **console}),
        auth_settings=auth,
        authz_settings=authz,
        bus=bus,
        authorizer=authorizer,
        console_codes=codes,
    )


@contextlib.asynccontextmanager
async def running_demo(args: argparse.Namespace) -> AsyncIterator[Demo]:  # noqa: PLR0915 - one ordered start of every part, read top to bottom
    """Start everything; stop it all and remove what was started on exit."""
    async with contextlib.AsyncExitStack() as stack:
        # The demo's own lines say so; each service binds its own name over it.
        stack.enter_context(bound(service="demo"))
        # The demo is one long-running process: its allocator as a service's (kit/allocator.py).
        base = load_settings(BaseSettings)
        await stack.enter_async_context(
            tuned_process(base.malloc_tuning, base.malloc_trim_interval_seconds)
        )
        # Each server's removal is registered before its start: a start that fails or is
        # interrupted half way still leaves no process and no temp folder behind.
        nats_url = os.environ.get("MOWDECK_NATS_URL")
        nats = DemoBus(url=nats_url) if nats_url else start_demo_nats(stack)
        nats_url = nats.url
        database_url = os.environ.get("MOWDECK_DATABASE_URL")
        if not database_url:
            pg = EmbeddedPostgres()
            stack.callback(pg.close)
            await _in_thread(pg.start)
            database_url = pg.url
        # Development: the devices are the demo's own simulator, on a port chosen now; the
        # gateway and Fleet may dial that host and port, no other service of the machine.
        sim_port = _port(args.port, 10) or free_port(args.host)
        brands, plan = await _brands(args, stack)
        device_hosts = os.environ.get("MOWDECK_GATEWAY_DEVICE_HOSTS") or json.dumps(
            demo_device_hosts(args.host, sim_port) + brands.device_hosts()
        )
        env = {
            "MOWDECK_NATS_URL": nats_url,
            "MOWDECK_DATABASE_URL": database_url,
            "MOWDECK_HTTP_HOST": args.host,
            "MOWDECK_GATEWAY_DEVICE_HOSTS": device_hosts,
            # Development: a VAPID key made on first start (kept in the state dir), and the
            # log channel for the demo user's target.
            "MOWDECK_NOTIFICATIONS_CHANNELS": os.environ.get(
                "MOWDECK_NOTIFICATIONS_CHANNELS", '["webpush", "ntfy", "log"]'
            ),
            "MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE": os.environ.get(
                "MOWDECK_NOTIFICATIONS_VAPID_KEY_FILE", str(Path(args.state_dir) / "vapid.pem")
            ),
            "MOWDECK_NOTIFICATIONS_VAPID_SUBJECT": os.environ.get(
                "MOWDECK_NOTIFICATIONS_VAPID_SUBJECT", "mailto:demo@mowdeck.invalid"
            ),
        }
        base = load_settings(BaseSettings, {**os.environ, **env})
        await migrate(
            database_url,
            discover(sql_root(), SERVICES),
            statement_timeout_ms=base.database_maintenance_statement_timeout_ms,
        )

        auth, key_file = demo_auth(Path(args.state_dir))
        token = TokenIssuer(auth).mint(DEMO_USER, DEMO_ACCOUNT, ttl_s=24 * 3600)
        # Realtime serves the console and starts last: the APIs' CORS origins name its
        # port, chosen now.
        realtime_port = _port(args.port, 4) or free_port(args.host)
        origins = console_origins(args.host, realtime_port)
        env["MOWDECK_HTTP_CORS_ORIGINS"] = msgspec.json.encode(origins).decode()
        authz = AuthzSettings(authz="local")

        # The tuples' pool stands in for OpenFGA, which every service asks. Each service
        # has a pool of its own, as in production: one service's slow queries can use up
        # only its own connections, never another's.
        pool = await asyncpg.create_pool(
            database_url,
            min_size=1,
            max_size=10,
            server_settings=session_settings(base.database_statement_timeout_ms),
        )
        stack.push_async_callback(pool.close)
        authorizer = LocalAuthorizer(PostgresTupleStore(pool))
        await authorizer.write(grant_tuples(DEMO_ACCOUNT, DEMO_USER, "admin"))
        # The admin step of `mowdeck streams`, before any service; then each service
        # connects as its own user (on a configured server: one shared connection).
        fast_path = base.nats_fast_path
        await nats.admin_step(stack, {**os.environ, **env}, fast_path=fast_path)
        bus = nats.shared

        def service_env(user: str, port_offset: int) -> dict[str, str]:
            port = str(_port(args.port, port_offset))
            return {**os.environ, **env, **nats.env(user), "MOWDECK_HTTP_PORT": port}

        fleet = FleetService(
            load_fleet_settings(service_env("fleet", 0)),
            auth_settings=auth,
            authz_settings=authz,
            bus=bus,
            authorizer=authorizer,
        )
        telemetry = freezing_service(  # as `mowdeck telemetry` runs it
            load_telemetry_settings(service_env("telemetry", 1)),
            auth_settings=auth,
            authz_settings=authz,
            bus=bus,
            authorizer=authorizer,
        )
        notifications = NotificationsService(
            load_notifications_settings(service_env("notifications", 3)),
            auth_settings=auth,
            authz_settings=authz,
            bus=bus,
            authorizer=authorizer,
        )
        # One write at start, through the demo's own pool.
        await _subscribe_demo_user(PostgresNotificationStore(pool))
        gateway = GatewayService(
            GatewaySettings(
                nats_url=nats_url,
                nats_fast_path=fast_path,
                nats_user=nats.env("gateway").get("MOWDECK_NATS_USER"),
                nats_password=nats.env("gateway").get("MOWDECK_NATS_PASSWORD"),
                http_host=args.host,
                http_port=_port(args.port, 2),
                gateway_device_hosts=json.loads(device_hosts),
                # A development machine: the emergency lane's thread stays ordinarily
                # scheduled (SCHED_FIFO needs a capability a developer's shell lacks).
                gateway_lane_realtime_priority=0,
                **brands.gateway_settings(),  # type: ignore[arg-type]
            ),
            bus=bus,
        )
        sim = SimulatorServer(
            FleetConfig(
                mowers=args.mowers,
                account_id=DEMO_ACCOUNT,
                seed=args.seed,
                speed=args.speed,
                # Callers that build their own arguments (tests) may leave it out.
                report_interval=getattr(args, "report_interval", 1.0),
                autostart=False,
            ),
            host=args.host,
            port=sim_port,
        )
        try:
            services: list[Service] = await start_all(
                [fleet, telemetry, notifications, gateway, _Sim(sim)]
            )
        except OSError as err:
            # Mostly a port in use: say which, without a traceback.
            raise DemoError(f"cannot start the services: {err.strerror or err}") from err
        stack.push_async_callback(stop_all, services, timeout=30.0)  # Realtime joins below
        codes = OneTimeCodes(ttl_s=600)
        realtime = _realtime(
            {**os.environ, **env, **nats.env("realtime"), "MOWDECK_HTTP_PORT": str(realtime_port)},
            (fleet, telemetry, notifications),
            codes,
            auth=auth,
            authz=authz,
            bus=bus,
            authorizer=authorizer,
        )
        try:
            services += await start_all([realtime])
        except OSError as err:
            raise DemoError(f"cannot start the services: {err.strerror or err}") from err
        try:
            await brands.start(sim.fleet, stack, plan)
        except (OSError, RuntimeError) as err:
            raise DemoError(f"cannot start the mowers of other brands: {err}") from err
        regs = brands.registrations(sim.registrations())
        failed = await register(fleet.url, regs, token=token)
        if failed:
            log.warning("some simulated mowers were not registered", failed=failed)
        # The gateway learns of the mowers from Fleet's events a moment later: a command
        # pasted from the banner before then would be rejected as for an unknown mower.
        await _until_known(gateway.mowers, [r.mower_id for r in regs])
        # The scenario tells its stories with the first three mowers (Mowdeck's own): the
        # examples use another of Mowdeck's, which does every command kind.
        others = [r.mower_id for r in regs if r.connection.kind != "simulator"]
        scenario_mowers = [r.mower_id for r in regs[:3]]
        own = [r.mower_id for r in regs if r.connection.kind == "simulator"][3:6]
        site = await demo_site(
            fleet.url, sim.url, token, [(m, sim.fleet.mower(m).garden) for m in own]
        )
        example, waits = ready_mower(sim.fleet, busy=[*scenario_mowers, *others])
        # The scenario issues commands as Fleet does, so as Fleet's user.
        commands = await nats.connect(
            stack, user="fleet", name="demo-scenario", fast_path=fast_path
        )
        scenario = asyncio.get_running_loop().create_task(
            run_scenario(commands, sim, DEMO_ACCOUNT), name="demo-scenario"
        )
        stack.push_async_callback(_cancel, scenario)
        yield Demo(
            token=token,
            fleet_url=fleet.url,
            telemetry_url=telemetry.url,
            notifications_url=notifications.url,
            gateway_url=gateway.url,
            sim_url=sim.url,
            realtime_url=realtime.url,
            mowers=[r.mower_id for r in sim.registrations()],
            console_url=f"{realtime.url}/?code={codes.issue(token)}",
            example=example,
            example_waits=waits,
            key_file=key_file,
            services=services,
            nats=nats,
            brands=brands,
            site_id=site,
        )


async def _brands(
    args: argparse.Namespace, stack: contextlib.AsyncExitStack
) -> tuple[Brands, tuple[range, range, range]]:
    """The brands of the mowers and what they need before the services start: the broker
    (started now) and the stand-in cloud's port (chosen now)."""
    openmower, automower = brand_counts(
        args.mowers, getattr(args, "openmower", None), getattr(args, "automower", None)
    )
    brands = Brands(host=args.host, state_dir=Path(args.state_dir), openmower_wanted=openmower)
    try:
        await brands.open_broker(stack)
    except (OSError, RuntimeError) as err:
        raise DemoError(f"cannot start mosquitto for the OpenMower mowers: {err}") from err
    plan = plan_brands(args.mowers, openmower if brands.broker else 0, automower)
    if plan[2]:
        brands.cloud_port = _port(args.port, 11) or free_port(args.host)
    return brands, plan


async def _until_known(
    known: Mapping[uuid.UUID, object], mowers: list[uuid.UUID], timeout: float = 10.0
) -> None:
    """Wait until the gateway's shard knows every one of ``mowers`` (at most ``timeout``)."""
    deadline = time.monotonic() + timeout
    # A poll: the shard's mower table has no change notification, and this runs once.
    while (missing := [m for m in mowers if m not in known]) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    if missing:
        log.warning("the gateway does not know every mower yet", missing=len(missing))


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
