"""The HTTP listener every service runs: aiohttp with what aiohttp does not do by default.

- A request the parser refuses (a header line over 8 KiB, a malformed request line) is
  answered with a problem+json 400 and one log line naming only the kind of error.
  aiohttp answers it in text/plain with the start of the offending line (a bearer token,
  say) echoed back, and logs a traceback with that line for every such request.
- Every response says ``Server: Mowdeck``, without versions.
- A client that disconnects cancels its request's handler, so a query it was waiting for
  is cancelled in PostgreSQL rather than left running for nobody (asyncpg cancels the
  statement of a cancelled query). Only safe methods (GET, HEAD, OPTIONS) are cancelled:
  the handler of anything that changes state runs to its end shielded, so nothing a
  client sent is half done because it stopped listening.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from mowdeck.kit.http import PROBLEM_BASE, PROBLEM_CONTENT_TYPE, Handler

__all__ = ["SERVER_HEADER", "HttpServer", "cancel_only_safe_methods"]

log = structlog.get_logger("mowdeck.http")

SERVER_HEADER = "Mowdeck"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@web.middleware
async def cancel_only_safe_methods(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Let a disconnect cancel a safe request's handler; shield every other one."""
    if request.method in SAFE_METHODS:
        return await handler(request)
    task = asyncio.ensure_future(handler(request))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        # The client went away (or the server stops): the handler runs on to its end;
        # its answer has nobody to go to, but what it does is done whole.
        task.add_done_callback(_report_orphan)
        raise


def _report_orphan(task: asyncio.Future[web.StreamResponse]) -> None:
    if task.cancelled():
        return
    err = task.exception()
    if err is not None and not isinstance(err, web.HTTPException):
        log.error("request failed after its client left", exc_info=err)


async def _server_header(_: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = SERVER_HEADER


class _ProblemRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering what its parser refuses as a problem."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A problem+json answer that echoes nothing the client sent; one log line."""
        del message  # the parser's message quotes the offending bytes
        if status >= HTTPStatus.INTERNAL_SERVER_ERROR:
            # Not the client's doing: the traceback is what finds the bug.
            log.error("request failed outside the application", exc_info=exc)
        else:
            # The parser's message quotes the offending bytes (a token, say): log and
            # answer only the kind of error.
            log.info(
                "request refused by the HTTP parser",
                status=status,
                error=type(exc).__name__ if exc is not None else None,
                remote=request.remote,
            )
        if request.writer.output_size > 0:
            raise ConnectionError("the response had begun; no error response can follow")
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        doc: dict[str, Any] = {
            "type": PROBLEM_BASE + "bad-http-request" if status < 500 else "about:blank",
            "title": phrase,
            "status": status,
        }
        if status < HTTPStatus.INTERNAL_SERVER_ERROR:
            doc["detail"] = _detail(exc)
        response = web.Response(
            status=status,
            body=json.dumps(doc).encode(),
            content_type=PROBLEM_CONTENT_TYPE,
            headers={"Server": SERVER_HEADER},
        )
        response.force_close()
        return response


def _detail(exc: BaseException | None) -> str:
    name = type(exc).__name__ if exc is not None else ""
    if name == "LineTooLong":
        return "a request line or header is longer than this server accepts (8190 bytes)"
    return "the request is not well-formed HTTP"


class _ProblemServer(web.Server):
    """aiohttp's server making ``_ProblemRequestHandler`` connections."""

    def __call__(self) -> RequestHandler:
        return _ProblemRequestHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The application made aiohttp's server with everything it needs; only the kind
        # of connection it makes differs, and the subclass adds no state.
        server.__class__ = _ProblemServer
        return server


class HttpServer:
    """Runs an aiohttp application on a host and port; ``port=0`` picks a free one."""

    def __init__(self, app: web.Application, host: str, port: int) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Listen."""
        app = self.app
        if not app.frozen:
            # Outermost: the whole chain, authentication included, is shielded or not.
            app.middlewares.insert(0, cancel_only_safe_methods)
            app.on_response_prepare.append(_server_header)
        self._runner = _Runner(
            app, access_log=None, handle_signals=False, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        """The base URL."""
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        """Stop listening and finish open requests."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
