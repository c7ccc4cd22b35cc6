"""A local ntfy server: accepts JSON publishes at the root, checks the bearer token."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["NtfyAnswer", "NtfyReceiver", "Published"]

PRIORITIES = range(1, 6)


@dataclass
class NtfyAnswer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    stall: float = 0.0
    redirect_to: str | None = None


@dataclass
class Published:
    message: dict[str, Any]
    authorization: str | None


class NtfyReceiver:
    """Publishes are checked like ntfy does (topic, priority, tags) and recorded."""

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.published: list[Published] = []
        self.problems: list[str] = []
        self.other_requests: list[str] = []
        self._answers: list[NtfyAnswer] = []
        self._runner: web.AppRunner | None = None
        self.url = ""
        self._arrived = asyncio.Condition()
        self._released = asyncio.Event()

    async def __aenter__(self) -> NtfyReceiver:
        app = web.Application()
        app.router.add_post("/", self._publish)
        app.router.add_route("*", "/{tail:.+}", self._other)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    def answer(self, *answers: NtfyAnswer) -> None:
        self._answers.extend(answers)

    async def wait_for(self, count: int, timeout: float = 5.0) -> None:
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.published) >= count), timeout
            )

    async def _publish(self, request: web.Request) -> web.Response:  # noqa: PLR0911 - one per check
        auth = request.headers.get("Authorization")
        if self.token is not None and auth != f"Bearer {self.token}":
            self.problems.append("wrong or missing bearer token")
            return web.json_response({"code": 40101, "error": "unauthorized"}, status=401)
        try:
            message = json.loads(await request.read())
        except ValueError:
            self.problems.append("body is not JSON")
            return web.json_response({"code": 40001, "error": "invalid JSON"}, status=400)
        if not isinstance(message.get("topic"), str) or not message["topic"]:
            self.problems.append("no topic")
            return web.json_response({"code": 40009, "error": "topic missing"}, status=400)
        if message.get("priority", 3) not in PRIORITIES:
            self.problems.append(f"priority {message.get('priority')!r}")
            return web.json_response({"code": 40007, "error": "invalid priority"}, status=400)
        if not all(isinstance(t, str) for t in message.get("tags", [])):
            self.problems.append("tags are not strings")
            return web.json_response({"code": 40000, "error": "invalid tags"}, status=400)
        async with self._arrived:
            self.published.append(Published(message, auth))
            self._arrived.notify_all()
        answer = self._answers.pop(0) if self._answers else NtfyAnswer()
        if answer.stall:
            # Released early when the receiver closes, so a stalled test ends at once.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), answer.stall)
        if answer.redirect_to is not None:
            return web.Response(status=answer.status, headers={"Location": answer.redirect_to})
        return web.json_response(
            {"id": "x", "topic": message["topic"]}, status=answer.status, headers=answer.headers
        )

    async def _other(self, request: web.Request) -> web.Response:
        self.other_requests.append(f"{request.method} {request.path}")
        return web.Response(status=200)
