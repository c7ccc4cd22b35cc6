"""A stand-in for the services the console calls, with a live stream it controls.

It serves ``console_routes`` next to a fake Fleet, Telemetry, Notifications and Realtime
stream (SSE, tickets), so the page's live path runs in a browser without the services.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from mowdeck.kit.http import Problem, problem_middleware
from mowdeck.kit.http_server import HttpServer
from mowdeck.notifications.rules.kinds import DEFAULT_ENABLED
from mowdeck.realtime.console import ConsoleConfig, OneTimeCodes, console_routes

TOKEN = "harness-token"  # the one token the fake APIs accept
MOWERS = [uuid.UUID(int=i, version=4) for i in (1, 2, 3)]
NAMES = {m: f"harness-{i + 1}" for i, m in enumerate(MOWERS)}
# One mower of each brand: the console shows brand and model, and marks a stop that pauses.
KINDS = dict(zip(MOWERS, ("simulator", "automower", "openmower"), strict=True))
SITES = [uuid.UUID(int=50 + i, version=4) for i in (1, 2)]
# The park holds the first two mowers; its areas lie around their positions.
PARK_RING = [[12.9998, 51.9998], [13.0008, 51.9998], [13.0008, 52.0006], [12.9998, 52.0006]]
POND_RING = [[13.0001, 52.0001], [13.0003, 52.0001], [13.0003, 52.0002]]


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Harness:
    """The fake services on one port; ``push`` sends an event to every open stream."""

    def __init__(self) -> None:
        self.codes = OneTimeCodes()
        self.streams: list[asyncio.Queue[tuple[str, dict[str, Any]]]] = []
        self.states = {m: self._state(m, i, "docked") for i, m in enumerate(MOWERS)}
        self.inbox: list[dict[str, Any]] = []
        self.alarms: dict[str, dict[str, Any]] = {}
        self.acknowledged: list[tuple[str, str | None]] = []  # (alarm id, comment) as asked
        # The preferences document as Notifications answers it for a user who never chose.
        self.preferences: dict[str, Any] = {
            "locale": "en",
            "timezone": "UTC",
            "scope": "none",
            "mowers": [],
            "kinds": dict(DEFAULT_ENABLED),
            "quiet_hours": None,
        }
        self.saved: list[dict[str, Any]] = []  # every PUT body, as sent
        self.targets: list[dict[str, Any]] = []
        self.registered: list[dict[str, Any]] = []
        self.removed: list[str] = []
        # Fleet's audit trail, newest first; pages of two so that the console pages.
        self.audit = [
            {
                "command_id": str(uuid.UUID(int=100 + n)),
                "account_id": str(uuid.UUID(int=0)),
                "mower_id": str(MOWERS[n % len(MOWERS)]),
                "kind": kind,
                "command": None,
                "issued_by": "erin",
                "issued_at": f"2026-05-0{5 - n}T10:00:00+00:00",
                "expires_at": f"2026-05-0{5 - n}T10:01:00+00:00",
                "statuses": [{"status": "executed", "at": f"2026-05-0{5 - n}T10:00:01+00:00"}],
            }
            for n, kind in enumerate(["start_mow", "emergency_stop", "start_mow"])
        ]
        self.audit_asked: list[dict[str, str]] = []
        self.alarm_trail: list[dict[str, Any]] = []
        self.commands_sent: list[tuple[str, str]] = []  # (mower id, kind) as posted
        self.sites = {SITES[0]: "Park", SITES[1]: "Allotment"}
        self.site_of: dict[uuid.UUID, uuid.UUID | None] = {
            MOWERS[0]: SITES[0],
            MOWERS[1]: SITES[0],
            MOWERS[2]: None,
        }
        self.areas_asked: list[str] = []
        self.seq = 0
        self._http: HttpServer | None = None
        self._moving: asyncio.Task[None] | None = None

    @staticmethod
    def _state(mower: uuid.UUID, i: int, activity: str) -> dict[str, Any]:
        return {
            "mower_id": str(mower),
            "account_id": str(uuid.UUID(int=0)),
            "observed_at": _now(),
            "activity": activity,
            "battery": 90 - 10 * i,
            "charging": False,
            "rtk_fix": "fixed",
            "blade_height_mm": 40,
            "speed_mps": 0.5,
            "position": {"lat": 52.0 + 0.0001 * i, "lon": 13.0 + 0.0002 * i},
            "raw": {"automower.model": "435X AWD"} if KINDS.get(mower) == "automower" else {},
        }

    async def start(self) -> str:
        """Listen on a free port; the console URL with a one-time code."""
        app = web.Application(middlewares=[problem_middleware])
        self._http = HttpServer(app, "127.0.0.1", 0)
        url = ""
        app.add_routes(self._routes())
        await self._http.start()
        url = self._http.url
        self._config = ConsoleConfig(
            fleet_url=url, telemetry_url=url, notifications_url=url, realtime_url=""
        )
        return f"{url}/?code={self.codes.issue(TOKEN)}"

    async def stop(self) -> None:
        if self._moving is not None:
            self._moving.cancel()
        for q in self.streams:
            q.put_nowait(("", {}))
        if self._http is not None:
            await self._http.stop()

    def _site_of(self, mower: uuid.UUID) -> str | None:
        site = self.site_of.get(mower)
        return None if site is None else str(site)

    def push(self, type_: str, data: dict[str, Any]) -> None:
        for q in self.streams:
            q.put_nowait((type_, data))

    def _set(self, mower: uuid.UUID, **changes: Any) -> None:
        state = {**self.states[mower], **changes, "observed_at": _now()}
        self.states[mower] = state
        self.push("state", state)

    def notify(self, mower: uuid.UUID, title: str, body: str) -> None:
        """An inbox item and its ``notification`` event, as a fault would cause."""
        item = {
            "id": str(uuid.uuid4()),
            "kind": "mower_stuck",
            "mower_id": str(mower),
            "severity": "warning",
            "title": title,
            "body": body,
            "occurred_at": _now(),
            "read": False,
        }
        self.inbox.insert(0, item)
        self.push(
            "notification",
            {
                "notification_id": item["id"],
                "user_id": "demo",
                "mower_id": str(mower),
                "kind": "mower_stuck",
                "severity": "warning",
                "dedupe_key": f"mower_stuck:{mower}:1",
                "title": title,
                "body": body,
            },
        )

    def raise_alarm(self, mower: uuid.UUID, code: str) -> str:
        """An open alarm of an error ``code`` and its ``alarm`` event (change raised)."""
        at = _now()
        alarm = {
            "id": str(uuid.uuid4()),
            "mower_id": str(mower),
            "condition": f"error:{code}",
            "kind": "mower_stuck",
            "severity": "critical",
            "state": "active",
            "first_at": at,
            "latest_at": at,
            "count": 1,
            "code": code,
            "acknowledged_by": None,
            "assignee": None,
            "cleared_at": None,
        }
        self.alarms[alarm["id"]] = alarm
        self._alarm_event(alarm, "raised")
        return alarm["id"]

    def _alarm_event(self, alarm: dict[str, Any], change: str, by: str | None = None) -> None:
        event = {k: v for k, v in alarm.items() if k != "id"}
        self.push("alarm", {**event, "alarm_id": alarm["id"], "change": change})
        # Notifications' alarm audit trail, newest first, as its API lists it.
        self.alarm_trail.insert(
            0,
            {
                "seq": len(self.alarm_trail) + 1,
                "at": _now(),
                "mower_id": alarm["mower_id"],
                "alarm_id": alarm["id"],
                "change": change,
                "kind": alarm["kind"],
                "condition": alarm["condition"],
                "severity": alarm["severity"],
                "code": alarm.get("code"),
                "by": by,
                "comment": alarm.get("comment") if change == "acknowledged" else None,
                "assignee": None,
            },
        )

    async def _move(self, mower: uuid.UUID) -> None:
        while self.states[mower]["activity"] == "mowing":
            pos = self.states[mower]["position"]
            self._set(mower, position={"lat": pos["lat"] + 0.00002, "lon": pos["lon"]})
            await asyncio.sleep(0.3)

    def schedule_of(self, mower: str) -> dict[str, Any]:
        """``GET /v1/mowers/{id}/schedule``: Fleet's answer for a mower never given one."""
        return {
            "mower_id": mower,
            "site_id": None,
            "enabled": False,
            "timezone": "UTC",
            "tasks": [],
            "next_start": None,
            "restricted": None,
            "recent_slots": [],
            "updated_at": _now(),
        }

    def _routes(self) -> list[web.RouteDef]:
        def authed(request: web.Request) -> None:
            ticket = request.query.get("ticket")
            if request.headers.get("Authorization") != f"Bearer {TOKEN}" and ticket != "t1":
                raise web.HTTPUnauthorized

        async def config(_: web.Request) -> web.Response:
            return web.json_response(json.loads(json.dumps(self._config, default=_fields)))

        async def mowers(request: web.Request) -> web.Response:
            # Pages of two, whatever the limit asked (a server may answer fewer): the
            # console must follow ``next_after`` to learn every name.
            authed(request)
            start = int(request.query.get("after", "0"))
            page = MOWERS[start : start + 2]
            more = start + 2 < len(MOWERS)
            return web.json_response(
                {
                    "mowers": [
                        {
                            "mower_id": str(m),
                            "name": NAMES[m],
                            "connection": {"kind": KINDS[m], "options": {}},
                            "site_id": self._site_of(m),
                        }
                        for m in page
                    ],
                    "next_after": str(start + 2) if more else None,
                    "has_more": more,
                }
            )

        async def states(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"items": list(self.states.values())})

        async def empty(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"items": [], "truncated": False})

        async def inbox(request: web.Request) -> web.Response:
            authed(request)
            unread = sum(not i["read"] for i in self.inbox)
            return web.json_response({"items": self.inbox, "next": None, "unread": unread})

        async def alarms(request: web.Request) -> web.Response:
            authed(request)
            asked = request.query.get("state")
            mower = request.query.get("mower")
            items = [
                a
                for a in self.alarms.values()
                if (a["state"] == asked if asked else a["state"] != "cleared")
                and (mower is None or a["mower_id"] == mower)
            ]
            return web.json_response({"items": items, "next": None})

        async def register(request: web.Request) -> web.Response:
            authed(request)
            body = await request.json()
            connection = body["connection"]
            if connection["kind"] == "openmower" and "broker" not in connection["options"]:
                raise Problem(
                    422,
                    "Unprocessable Content",
                    "`connection.options.broker` is required",
                    type_="invalid",
                    extra={"field": "connection.options.broker"},
                )
            mower = uuid.uuid4()
            self.registered.append(body)
            NAMES[mower] = body["name"]
            return web.json_response(
                {"mower_id": str(mower), "name": body["name"], "connection": connection},
                status=201,
            )

        async def rename(request: web.Request) -> web.Response:
            authed(request)
            mower = uuid.UUID(request.match_info["mower_id"])
            body = await request.json()
            if "name" in body:
                NAMES[mower] = body["name"]
            if "site_id" in body:
                self.site_of[mower] = (
                    None if body["site_id"] is None else uuid.UUID(body["site_id"])
                )
            return web.json_response(
                {"mower_id": str(mower), "name": NAMES[mower], "site_id": self._site_of(mower)}
            )

        async def sites(request: web.Request) -> web.Response:
            authed(request)
            views = [
                {
                    "site_id": str(site),
                    "name": name,
                    "timezone": "Europe/Berlin",
                    "location": {"lat": 52.0, "lon": 13.0},
                }
                for site, name in self.sites.items()
            ]
            return web.json_response({"sites": views, "next_after": None, "has_more": False})

        async def site_areas(request: web.Request) -> web.Response:
            authed(request)
            site = request.match_info["site_id"]
            self.areas_asked.append(site)
            features = []
            if site == str(SITES[0]):
                for name, kind, ring in (
                    ("Lawn", "work_area", PARK_RING),
                    ("Pond", "stay_out", POND_RING),
                ):
                    features.append(
                        {
                            "type": "Feature",
                            "properties": {"name": name, "kind": kind},
                            "geometry": {"type": "Polygon", "coordinates": [[*ring, ring[0]]]},
                        }
                    )
            version = 3 if features else 0
            return web.json_response(
                {
                    "type": "FeatureCollection",
                    "site_id": site,
                    "version": version,
                    "features": features,
                }
            )

        async def remove(request: web.Request) -> web.Response:
            authed(request)
            self.removed.append(request.match_info["mower_id"])
            return web.Response(status=204)

        def audit_matches(request: web.Request) -> list[dict[str, Any]]:
            q = request.query
            return [
                c
                for c in self.audit
                if (not q.get("kind") or c["kind"] == q["kind"])
                and (not q.get("mower") or c["mower_id"] == q["mower"])
            ]

        async def audit(request: web.Request) -> web.Response:
            authed(request)
            self.audit_asked.append(dict(request.query))
            found = audit_matches(request)
            start = int(request.query.get("after", "0"))
            page = found[start : start + 2]
            more = start + 2 < len(found)
            return web.json_response(
                {"commands": page, "next_after": str(start + 2) if more else None, "has_more": more}
            )

        async def audit_export(request: web.Request) -> web.Response:
            authed(request)
            lines = "".join(json.dumps(c) + "\n" for c in audit_matches(request))
            return web.Response(text=lines, content_type="application/x-ndjson")

        def trail_matches(request: web.Request) -> list[dict[str, Any]]:
            change = request.query.get("change")
            return [x for x in self.alarm_trail if not change or x["change"] == change]

        async def alarm_audit(request: web.Request) -> web.Response:
            authed(request)
            self.audit_asked.append(dict(request.query))
            found = trail_matches(request)
            return web.json_response({"items": found, "next_after": None, "has_more": False})

        async def alarm_audit_export(request: web.Request) -> web.Response:
            authed(request)
            lines = "".join(json.dumps(x) + "\n" for x in trail_matches(request))
            return web.Response(text=lines, content_type="application/x-ndjson")

        async def targets(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"items": self.targets, "next": None})

        async def add_target(request: web.Request) -> web.Response:
            authed(request)
            body = await request.json()
            target = {"id": str(uuid.uuid4()), "created_at": _now(), **body, "token_set": False}
            self.targets.append(target)
            return web.json_response(target, status=201)

        async def remove_target(request: web.Request) -> web.Response:
            authed(request)
            self.targets = [t for t in self.targets if t["id"] != request.match_info["target_id"]]
            return web.Response(status=204)

        async def acknowledge(request: web.Request) -> web.Response:
            authed(request)
            alarm = self.alarms[request.match_info["alarm_id"]]
            comment = (await request.json()).get("comment")
            self.acknowledged.append((alarm["id"], comment))
            alarm.update(state="acknowledged", acknowledged_by="harness-user", comment=comment)
            self._alarm_event(alarm, "acknowledged", by="harness-user")
            return web.json_response(alarm)

        async def get_preferences(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response(self.preferences)

        async def put_preferences(request: web.Request) -> web.Response:
            authed(request)
            body = await request.json()
            self.saved.append(body)
            kinds = {**DEFAULT_ENABLED, **body.get("kinds", {})}
            self.preferences = {**self.preferences, "quiet_hours": None, **body, "kinds": kinds}
            return web.json_response(self.preferences)

        async def schedule(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response(self.schedule_of(request.match_info["mower_id"]))

        async def ticket(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"ticket": "t1"})

        async def command(request: web.Request) -> web.Response:
            authed(request)
            mower = uuid.UUID(request.match_info["mower_id"])
            kind = (await request.json())["command"]["kind"]
            self.commands_sent.append((str(mower), kind))
            command_id = str(uuid.uuid4())
            for status in ("accepted", "executed"):
                self.push(
                    "command",
                    {"command_id": command_id, "mower_id": str(mower), "status": status,
                     "at": _now(), "kind": kind},
                )  # fmt: skip
            if kind == "start_mow":
                self._set(mower, activity="mowing")
                self._moving = asyncio.ensure_future(self._move(mower))
            elif kind == "emergency_stop":
                self._set(mower, activity="stopped")
            return web.json_response({"command_id": command_id, "status": "pending"}, status=202)

        async def stream(request: web.Request) -> web.StreamResponse:
            authed(request)
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
            for state in self.states.values():
                queue.put_nowait(("state", state))
            self.streams.append(queue)
            try:
                while True:
                    type_, data = await queue.get()
                    if not type_:
                        break
                    self.seq += 1
                    frame = f"event: {type_}\nid: h{self.seq}\ndata: {json.dumps(data)}\n\n"
                    await response.write(frame.encode())
            finally:
                self.streams.remove(queue)
            return response

        return [
            web.get("/console/config.json", config),
            *console_routes(
                ConsoleConfig(fleet_url="", telemetry_url=""),  # config.json is served above
                self.codes,
            ),
            web.get("/v1/mowers", mowers),
            web.get("/v1/sites", sites),
            web.get("/v1/sites/{site_id}/areas", site_areas),
            web.get("/v1/audit", audit),
            web.get("/v1/audit/export", audit_export),
            web.post("/v1/mowers", register),
            web.patch("/v1/mowers/{mower_id}", rename),
            web.delete("/v1/mowers/{mower_id}", remove),
            web.get("/v1/states", states),
            web.get("/v1/mowers/{mower_id}/history", empty),
            web.get("/v1/mowers/{mower_id}/track", empty),
            web.get("/v1/mowers/{mower_id}/commands", empty),
            web.post("/v1/mowers/{mower_id}/commands", command),
            web.get("/v1/mowers/{mower_id}/schedule", schedule),
            web.get("/v1/notifications/inbox", inbox),
            web.get("/v1/alarms", alarms),
            web.get("/v1/alarms/audit", alarm_audit),
            web.get("/v1/alarms/audit/export", alarm_audit_export),
            web.get("/v1/notifications/preferences", get_preferences),
            web.get("/v1/notifications/targets", targets),
            web.post("/v1/notifications/targets", add_target),
            web.delete("/v1/notifications/targets/{target_id}", remove_target),
            web.put("/v1/notifications/preferences", put_preferences),
            web.post("/v1/alarms/{alarm_id}/acknowledge", acknowledge),
            web.post("/v1/stream/tickets", ticket),
            web.get("/v1/stream", stream),
        ]


def _fields(obj: Any) -> Any:
    import msgspec  # noqa: PLC0415 - only for the config

    return msgspec.to_builtins(obj)
