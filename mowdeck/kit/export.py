"""Exports as JSON lines: every page of a query streamed in one response.

The first page is read before the headers go out, so a database that is down is still a
problem response (its 503) rather than an empty 200. Once the status line is sent, a
failure can only cut the stream short: the client sees a body without its last chunk.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

import structlog
from aiohttp import web

__all__ = ["ndjson_export"]

log = structlog.get_logger("mowdeck.kit.export")


async def ndjson_export(
    request: web.Request,
    pages: AsyncGenerator[Sequence[Any], None],
    encode: Callable[[Any], bytes],
    *,
    failures: tuple[type[BaseException], ...],
    what: str,
) -> web.StreamResponse:
    """Stream every item of ``pages`` as one JSON line; close ``pages`` in any case.

    ``failures`` are the errors of the store that may end the stream midway (logged, the
    connection closed); ``what`` names the export in the log.
    """
    try:
        first = await anext(pages, None)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            page = first
            while page is not None:
                await response.write(b"".join(encode(item) + b"\n" for item in page))
                page = await anext(pages, None)
        except failures:
            log.exception("export failed mid-stream", export=what)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        return response
    finally:
        await pages.aclose()
