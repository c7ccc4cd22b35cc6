"""The simulator's HTTP side: a WebSocket per mower plus introspection and fault control."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from contracts.v1 import Connection, MowerRegistration
from mowdeck.kit.http import Problem, json_response, problem_middleware, read_json
from mowdeck.kit.http_server import HttpServer
from mowdeck.kit.openapi import add_openapi
from simulator.areas import AreaError, decode_areas
from simulator.faults import Fault, FaultError, decode_fault
from simulator.fleet import FleetConfig, SimulatorFleet, UnknownMowerError
from simulator.metrics import simulator_registry
from simulator.openapi import openapi
from simulator.session import MowerSession
from simulator.views import (
    AreasView,
    FaultsView,
    FramesView,
    Garden,
    Health,
    MowerDetail,
    MowerList,
    MowerSummary,
)

__all__ = ["FLEET", "SimulatorServer", "create_app"]

FLEET = web.AppKey("fleet", SimulatorFleet)
_PUBLIC = web.AppKey("public_base", list[str])  # [ws base URL], filled in once listening
_REGISTRY = web.AppKey("registry", CollectorRegistry)


def _mower_index(request: web.Request) -> int:
    fleet = request.app[FLEET]
    try:
        return fleet.index(uuid.UUID(request.match_info["mower_id"]))
    except (ValueError, UnknownMowerError):
        raise Problem(
            404, "Not Found", "no simulated mower has this id", type_="unknown-mower"
        ) from None


async def _websocket(request: web.Request) -> web.StreamResponse:
    fleet = request.app[FLEET]
    i = _mower_index(request)
    if fleet.mowers[i].transport.link_down_until > fleet.clock.wall():
        raise Problem(503, "Service Unavailable", "link loss (fault injected)", type_="link-loss")
    if fleet.is_stopping():
        raise Problem(503, "Service Unavailable", "the simulator is stopping", type_="stopping")
    ws = web.WebSocketResponse(max_msg_size=64 * 1024)
    await ws.prepare(request)
    session = MowerSession(ws, request, fleet, i)
    if fleet.is_stopping():  # it began to stop during the handshake
        await session.drop("simulator stopping")
        return ws
    old = fleet.attach(i, session)
    if old is not None:
        await old.drop("replaced by a newer connection")
    try:
        await session.serve()
    finally:
        fleet.detach(i, session)
    return ws


def _summary(request: web.Request, i: int) -> MowerSummary:
    fleet = request.app[FLEET]
    m = fleet.mowers[i]
    return MowerSummary(
        mower_id=m.mower_id,
        name=m.name,
        activity=m.body.activity,
        battery=round(m.body.battery, 1),
        connected=fleet.links[i] is not None,
        faults=m.faults(fleet.clock.wall()),
    )


async def _list(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    mowers = [_summary(request, i) for i in range(len(fleet.mowers))]
    return json_response(MowerList(count=len(mowers), mowers=mowers))


async def _detail(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    i = _mower_index(request)
    m = fleet.mowers[i]
    m.advance(fleet.clock.now())
    g = m.garden
    summary = _summary(request, i)
    doc = MowerDetail(
        **{f: getattr(summary, f) for f in summary.__struct_fields__},
        account_id=m.account_id,
        url=_url(request.app, m.mower_id),
        state=m.state(datetime.now(UTC)),
        garden=Garden(
            polygon=[list(p) for p in g.polygon()], dock=list(g.to_latlon(g.dock_x, g.dock_y))
        ),
        commands=list(m.commands or ()),
    )
    return json_response(doc)


async def _frames(request: web.Request) -> web.Response:
    m = request.app[FLEET].mowers[_mower_index(request)]
    frames = {str(command_id): n for command_id, n in m.frames().items()}
    return json_response(FramesView(count=len(frames), frames=frames))


async def _inject(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    i = _mower_index(request)
    try:
        fault: Fault = decode_fault(await read_json(request))
    except FaultError as err:
        raise Problem(422, "Unprocessable Content", str(err), type_="invalid-fault") from None
    await fleet.inject(fleet.mowers[i].mower_id, fault)
    return json_response(FaultsView(faults=fleet.mowers[i].faults(fleet.clock.wall())))


async def _clear(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    i = _mower_index(request)
    await fleet.clear_faults(fleet.mowers[i].mower_id)
    return json_response(FaultsView(faults=fleet.mowers[i].faults(fleet.clock.wall())))


async def _set_areas(request: web.Request) -> web.Response:
    m = request.app[FLEET].mowers[_mower_index(request)]
    try:
        m.areas = decode_areas(await read_json(request))
    except AreaError as err:
        raise Problem(422, "Unprocessable Content", str(err), type_="invalid-areas") from None
    return json_response(AreasView(areas=list(m.areas)))


async def _registrations(request: web.Request) -> web.Response:
    return json_response(registrations(request.app))


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[_REGISTRY])
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _health(request: web.Request) -> web.Response:
    fleet = request.app[FLEET]
    return json_response(
        Health(
            status="ok",
            mowers=len(fleet.mowers),
            states_sent=fleet.states_sent,
            states_skipped=fleet.states_skipped,
        )
    )


def _url(app: web.Application, mower_id: uuid.UUID) -> str:
    return f"{app[_PUBLIC][0]}/mowers/{mower_id}/ws"


def registrations(app: web.Application) -> list[MowerRegistration]:
    """Every mower as a ``MowerRegistration`` of connection kind ``simulator``."""
    return [
        MowerRegistration(
            mower_id=m.mower_id,
            account_id=m.account_id,
            name=m.name,
            connection=Connection(kind="simulator", options={"url": _url(app, m.mower_id)}),
        )
        for m in app[FLEET].mowers
    ]


def create_app(fleet: SimulatorFleet) -> web.Application:
    """The simulator's aiohttp application."""
    app = web.Application(middlewares=[problem_middleware])
    app[FLEET] = fleet
    app[_PUBLIC] = ["ws://127.0.0.1"]
    app[_REGISTRY] = simulator_registry(fleet)
    app.add_routes(
        [
            web.get("/mowers/{mower_id}/ws", _websocket),
            web.get("/sim/mowers", _list),
            web.get("/sim/mowers/{mower_id}", _detail),
            web.get("/sim/mowers/{mower_id}/frames", _frames),
            web.post("/sim/mowers/{mower_id}/faults", _inject),
            web.delete("/sim/mowers/{mower_id}/faults", _clear),
            web.put("/sim/mowers/{mower_id}/areas", _set_areas),
            web.get("/sim/registrations", _registrations),
            web.get("/healthz", _health),
            web.get("/metrics", _metrics),
        ]
    )
    add_openapi(app, openapi())
    return app


class SimulatorServer:
    """A simulated fleet served on ``host:port`` (0 picks a free port), for CLI and tests."""

    def __init__(
        self,
        config: FleetConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        public_host: str | None = None,
        fleet: SimulatorFleet | None = None,
    ) -> None:
        self.fleet = fleet or SimulatorFleet(config)
        self.app = create_app(self.fleet)
        self._http = HttpServer(self.app, host, port)
        self._public_host = public_host

    async def start(self) -> None:
        """Listen and start the mowers' ticker."""
        await self._http.start()
        host = self._public_host or self._http.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 literal in a URL
        self.app[_PUBLIC][0] = f"ws://{host}:{self._http.port}"
        await self.fleet.start()

    async def stop(self) -> None:
        """Stop the ticker, drop the links and stop listening."""
        await self.fleet.stop()
        await self._http.stop()

    @property
    def port(self) -> int:
        """The port listened on."""
        return self._http.port

    @property
    def url(self) -> str:
        """The HTTP base URL."""
        return self._http.url

    def registrations(self) -> list[MowerRegistration]:
        """Every mower as a ``MowerRegistration`` pointing at this server."""
        return registrations(self.app)

    async def inject(self, mower_id: uuid.UUID, fault: Fault) -> None:
        """Inject a fault into one mower."""
        await self.fleet.inject(mower_id, fault)

    async def clear_faults(self, mower_id: uuid.UUID) -> None:
        """End every fault of one mower."""
        await self.fleet.clear_faults(mower_id)
