"""A stand-in of the Automower Connect cloud: token endpoint, REST API and WebSocket.

One aiohttp server plays the vendor's three hosts under three path prefixes:
``/auth/v1/oauth2/token`` (OAuth2 client credentials: ``expires_in`` seconds of bearer
token), ``/api/v1`` (``GET /mowers``, ``POST /mowers/{id}/actions`` and ``/settings``,
answering 202 as the vendor does and acting a moment later) and ``/ws/v1`` (the
``*-event-v2`` messages of every change, ``pong`` to ``ping``). Requests need the
bearer token and ``X-Api-Key`` (the client id) and ``Authorization-Provider:
husqvarna``, as the vendor's do; more than ``rate`` requests a second per client answer
429 with ``Retry-After``, as its one-request-a-second limit does.

Knobs for tests: ``deaf`` mowers take commands and do nothing; ``mute`` answers no
``ping``; ``Mower.state`` may be
set and ``push`` sends its events; ``drop_sockets()`` ends every WebSocket.

A mower's ``act`` and ``set_cutting_height`` may return an awaitable: the mower then
reports what came of it itself (``send_events``), as the simulator's bridged mowers do
(``bridge.py``); otherwise the cloud pushes the mower's events after the change.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
from aiohttp import WSMsgType, web

from simulator.automower.protocol import (
    ACTION_PARK_UNTIL_FURTHER_NOTICE,
    ACTION_PARK_UNTIL_NEXT_SCHEDULE,
    ACTION_PAUSE,
    ACTION_RESUME_SCHEDULE,
    ACTION_START,
    ACTION_START_IN_WORK_AREA,
)

__all__ = ["StandInCloud", "StandInMower"]

_REACT_SECONDS = 0.1  # the vendor's cloud acts a moment after its 202
_JSONAPI = "application/vnd.api+json"
_ACTIONS = frozenset(
    {
        ACTION_START,
        ACTION_START_IN_WORK_AREA,
        ACTION_PAUSE,
        ACTION_RESUME_SCHEDULE,
        ACTION_PARK_UNTIL_NEXT_SCHEDULE,
        ACTION_PARK_UNTIL_FURTHER_NOTICE,
    }
)


@dataclass
class StandInMower:
    """One mower of the stand-in cloud, as its attributes' parts."""

    id: str
    activity: str = "PARKED_IN_CS"
    state: str = "RESTRICTED"
    battery: int = 100
    cutting_height: int = 4
    lat: float = 57.70074
    lon: float = 14.4787133
    connected: bool = True
    deaf: bool = False
    error_code: int = 0
    model: str = "Stand-in"
    owner: str | None = None  # the client id whose account has it (None: every one's)
    name: str = ""
    work_areas: list[tuple[int, str]] = field(default_factory=list)  # (id, name)
    commands: list[dict[str, object]] = field(default_factory=list)

    def attributes(self) -> dict[str, object]:
        areas = [
            {"workAreaId": i, "name": n, "enabled": True, "cuttingHeight": 50}
            for i, n in self.work_areas
        ]
        capabilities = {
            "canConfirmError": False,
            "headlights": False,
            "position": True,
            "stayOutZones": False,
            "workAreas": bool(areas),
        }
        return {
            "system": {"name": self.name or self.id, "model": self.model, "serialNumber": 1},
            "capabilities": capabilities,
            **({"workAreas": areas} if areas else {}),
            "battery": {"batteryPercent": self.battery, "remainingChargingTime": 0},
            "mower": self._mower(),
            "planner": {
                "nextStartTimestamp": 0,
                "override": {"action": "NOT_ACTIVE"},
                "restrictedReason": "NONE",
            },
            "metadata": {"connected": self.connected, "statusTimestamp": int(time.time() * 1000)},
            "positions": [{"latitude": self.lat, "longitude": self.lon}],
            "settings": {"cuttingHeight": self.cutting_height, "headlight": {"mode": None}},
        }

    def _mower(self) -> dict[str, object]:
        return {
            "mode": "MAIN_AREA",
            "activity": self.activity,
            "inactiveReason": "NONE",
            "state": self.state,
            "errorCode": self.error_code,
            "errorCodeTimestamp": 0,
            "isErrorConfirmable": False,
        }

    def events(self) -> list[dict[str, object]]:
        """The events reporting this mower as it is now."""
        parts = {
            "mower-event-v2": {"mower": self._mower()},
            "battery-event-v2": {"battery": {"batteryPercent": self.battery}},
            "position-event-v2": {"position": {"latitude": self.lat, "longitude": self.lon}},
            "cuttingHeight-event-v2": {"cuttingHeight": {"height": self.cutting_height}},
        }
        return [{"id": self.id, "type": t, "attributes": a} for t, a in parts.items()]

    def act(self, kind: str, attributes: dict[str, object]) -> Awaitable[None] | None:  # noqa: ARG002 - a bridged mower's
        """What the mower does on an action."""
        if kind in (ACTION_START, ACTION_START_IN_WORK_AREA):
            self.activity, self.state = "MOWING", "IN_OPERATION"
        elif kind == ACTION_PAUSE:
            self.state = "PAUSED"
        elif kind == ACTION_RESUME_SCHEDULE:
            self.activity, self.state = "PARKED_IN_CS", "RESTRICTED"
        elif kind in (ACTION_PARK_UNTIL_NEXT_SCHEDULE, ACTION_PARK_UNTIL_FURTHER_NOTICE):
            self.activity, self.state = "GOING_HOME", "IN_OPERATION"
        return None

    def set_cutting_height(self, level: int) -> Awaitable[None] | None:
        """What the mower does on a new cutting height."""
        self.cutting_height = level
        return None


class StandInCloud:
    """The stand-in, serving on ``127.0.0.1`` at an ephemeral port once started."""

    def __init__(
        self,
        clients: dict[str, str],
        *,
        expires_in: int = 3600,
        rate: float = 1.0,
        retry_after: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.clients = dict(clients)  # client_id -> client_secret
        self.expires_in = expires_in
        self.rate, self.retry_after = rate, retry_after
        self.mowers: dict[str, StandInMower] = {}
        self.tokens: dict[str, tuple[str, float]] = {}  # token -> (client_id, expiry)
        self.token_requests = 0
        self.requests: list[tuple[str, str]] = []  # (method, path) answered below 429
        self.throttled = 0
        self._last: dict[str, float] = {}
        self._sockets: dict[web.WebSocketResponse, str] = {}  # -> its client id
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.host, self.port = host, port
        self.events_sent = 0  # event messages written to sockets
        self.mute = False  # answer no ping (a socket gone without a close)
        self.list_failures = 0  # answer this many GET /mowers with 503 (a bad moment)
        # Awaited once an answer to GET /mowers is made, before it is sent (then cleared):
        # what happens between the vendor taking a snapshot and the client reading it.
        self.before_list_answer: Callable[[], Awaitable[None]] | None = None

    def add(self, mower: StandInMower) -> StandInMower:
        self.mowers[mower.id] = mower
        return mower

    @property
    def _netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def base(self) -> str:
        return f"http://{self._netloc}"

    @property
    def endpoints(self) -> dict[str, str]:
        """The three URLs, as ``AutomowerEndpoints`` takes them."""
        return {
            "token_url": f"{self.base}/auth/v1/oauth2/token",
            "api_url": f"{self.base}/api/v1",
            "ws_url": f"ws://{self._netloc}/ws/v1",
        }

    @property
    def open_sockets(self) -> int:
        """How many WebSockets are open."""
        return len(self._sockets)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/auth/v1/oauth2/token", self._token)
        app.router.add_get("/api/v1/mowers", self._list)
        app.router.add_post("/api/v1/mowers/{id}/actions", self._action)
        app.router.add_post("/api/v1/mowers/{id}/settings", self._settings)
        app.router.add_get("/ws/v1", self._ws)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        await self.drop_sockets()
        for task in list(self._tasks):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    async def drop_sockets(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    async def push(self, mower: StandInMower) -> None:
        """Send ``mower``'s events on every WebSocket."""
        await self.send_events(mower.events())

    async def send_events(self, events: list[dict[str, object]]) -> None:
        """Send ``events`` on every WebSocket (the vendor's: all of the application's)."""
        for event in events:
            data = msgspec.json.encode(event).decode()
            mower = self.mowers.get(str(event.get("id")))
            owner = mower.owner if mower is not None else None
            for ws, client in list(self._sockets.items()):
                if not ws.closed and owner in (None, client):
                    await ws.send_str(data)
                    self.events_sent += 1

    # Handlers.

    async def _token(self, request: web.Request) -> web.Response:
        self.token_requests += 1
        form = await request.post()
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        client, secret = str(form.get("client_id", "")), str(form.get("client_secret", ""))
        if not client or not secrets.compare_digest(self.clients.get(client, "\0"), secret):
            return web.json_response({"error": "invalid_client"}, status=401)
        token = secrets.token_hex(16)
        self.tokens[token] = (client, time.monotonic() + self.expires_in)
        return web.json_response(
            {
                "access_token": token,
                "scope": "iam:read amc:api",
                "expires_in": self.expires_in,
                "provider": "husqvarna",
                "user_id": "stand-in",
                "token_type": "Bearer",
            }
        )

    def _refusal(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        found = self.tokens.get(auth.removeprefix("Bearer "))
        if found is None or found[1] < time.monotonic():
            return web.json_response({"message": "Unauthorized"}, status=401)
        client = found[0]
        if request.headers.get("X-Api-Key") != client:
            return web.json_response({"message": "X-Api-Key is not the token's"}, status=403)
        if request.headers.get("Authorization-Provider") != "husqvarna":
            return web.json_response({"message": "Authorization-Provider missing"}, status=403)
        now = time.monotonic()
        if now - self._last.get(client, -math.inf) < 1.0 / self.rate:
            self.throttled += 1
            return web.json_response(
                {"message": "Too Many Requests"},
                status=429,
                headers={"Retry-After": str(self.retry_after)},
            )
        self._last[client] = now
        self.requests.append((request.method, request.path))
        return None

    def _client(self, request: web.Request) -> str:
        """The client id of a request ``_refusal`` let through."""
        return self.tokens[request.headers["Authorization"].removeprefix("Bearer ")][0]

    async def _list(self, request: web.Request) -> web.Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        if self.list_failures > 0:
            self.list_failures -= 1
            return web.json_response({"errors": [{"title": "Unavailable"}]}, status=503)
        client = self._client(request)
        data = [
            {"type": "mower", "id": m.id, "attributes": m.attributes()}
            for m in self.mowers.values()
            if m.owner in (None, client)
        ]
        hook, self.before_list_answer = self.before_list_answer, None
        if hook is not None:
            await hook()
        return web.json_response({"data": data}, content_type=_JSONAPI)

    async def _command(
        self, request: web.Request
    ) -> tuple[StandInMower, dict[str, object]] | web.Response:
        if (refused := self._refusal(request)) is not None:
            return refused
        mower = self.mowers.get(request.match_info["id"])
        if mower is None or mower.owner not in (None, self._client(request)):
            return web.json_response({"errors": [{"title": "Mower not found"}]}, status=404)
        try:
            body = msgspec.json.decode(await request.read(), type=dict[str, dict[str, object]])
            data = body["data"]
        except (msgspec.DecodeError, msgspec.ValidationError, KeyError):
            return web.json_response({"errors": [{"title": "Bad request"}]}, status=400)
        mower.commands.append(data)
        return mower, data

    async def _action(self, request: web.Request) -> web.Response:
        found = await self._command(request)
        if isinstance(found, web.Response):
            return found
        mower, data = found
        kind = str(data.get("type"))
        if kind not in _ACTIONS:
            return web.json_response({"errors": [{"title": f"Unknown action {kind}"}]}, status=400)
        attributes = data.get("attributes")
        attributes = attributes if isinstance(attributes, dict) else {}
        if kind == ACTION_START_IN_WORK_AREA and attributes.get("workAreaId") not in {
            i for i, _ in mower.work_areas
        }:
            return web.json_response({"errors": [{"title": "Unknown workAreaId"}]}, status=400)
        self._later(mower, lambda: mower.act(kind, attributes))
        return web.json_response({"data": {"type": "control", "id": mower.id}}, status=202)

    async def _settings(self, request: web.Request) -> web.Response:
        found = await self._command(request)
        if isinstance(found, web.Response):
            return found
        mower, data = found
        attributes = data.get("attributes")
        level = attributes.get("cuttingHeight") if isinstance(attributes, dict) else None
        if not isinstance(level, int) or not 1 <= level <= 9:
            return web.json_response({"errors": [{"title": "cuttingHeight 1-9"}]}, status=400)
        self._later(mower, lambda: mower.set_cutting_height(level))
        return web.json_response({"data": {"type": "settings", "id": mower.id}}, status=202)

    def _later(self, mower: StandInMower, change: Callable[[], Awaitable[None] | None]) -> None:
        if mower.deaf:
            return

        async def act() -> None:
            await asyncio.sleep(_REACT_SECONDS)
            reported = change()
            if inspect.isawaitable(reported):
                await reported  # the mower reports what came of it itself
            else:
                await self.push(mower)

        task = asyncio.create_task(act())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ws(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        found = self.tokens.get(auth.removeprefix("Bearer "))
        if found is None or found[1] < time.monotonic():
            return web.json_response({"message": "Unauthorized"}, status=401)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets[ws] = found[0]
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT and msg.data == "ping" and not self.mute:
                    await ws.send_str("pong")
        finally:
            self._sockets.pop(ws, None)
        return ws
