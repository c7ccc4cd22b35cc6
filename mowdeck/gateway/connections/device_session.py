"""The HTTP session device links dial through: no redirect, no host the allow-list refuses.

aiohttp's ``ws_connect`` follows redirects (it calls ``request()`` with its defaults, and
takes no ``allow_redirects``), so an endpoint on an allowed host answering ``302`` would make
the gateway request whatever address it named, on every reconnect. aiohttp runs a
session's client middlewares for every hop of a request, redirects included: the one here
checks each request's URL against ``MOWDECK_GATEWAY_DEVICE_HOSTS`` before it is sent (the
gateway checked the registration at apply; this holds whoever built the connection) and
refuses any ``3xx`` answer instead of following it.

One session per event loop and allow-list, shared by the links that use it and closed with
the last of them: a shard holds thousands of links.
"""

from __future__ import annotations

import asyncio
import weakref

import aiohttp
from aiohttp import hdrs

from mowdeck.devices.endpoints import DeviceHosts

__all__ = ["DeviceSessions", "RequestRefusedError", "guard"]

_SHOWN = 200  # characters of a device's Location header put in a reason


class RequestRefusedError(aiohttp.ClientError):
    """A device link's request the session refused: a host not allowed, or a redirect.

    An ``aiohttp.ClientError``, so aiohttp hands it up unchanged and a link treats it as a
    failed connect (retried with backoff).
    """


def guard(hosts: DeviceHosts) -> aiohttp.ClientMiddlewareType:
    """The middleware that refuses requests ``hosts`` does not allow and every redirect."""

    async def refuse_strangers_and_redirects(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        refusal = hosts.refusal(str(request.url))
        if refusal is not None:
            raise RequestRefusedError(f"not requested: {request.url} {refusal}")
        response = await handler(request)
        if 300 <= response.status < 400:  # the redirection class
            location = response.headers.get(hdrs.LOCATION, "(none)")[:_SHOWN]
            response.close()  # unread, never followed: the connection is not reused
            raise RequestRefusedError(
                f"{request.url} answered {response.status} to {location!r}; "
                "device links follow no redirect"
            )
        return response

    return refuse_strangers_and_redirects


class _Shared:
    __slots__ = ("session", "users")

    def __init__(self, hosts: DeviceHosts) -> None:
        self.session = aiohttp.ClientSession(
            # The simulator's mowers are many per host: no per-host connection limit.
            connector=aiohttp.TCPConnector(limit=0),
            middlewares=(guard(hosts),),
        )
        self.users = 0


class DeviceSessions:
    """The shared sessions of device links, by event loop and allow-list."""

    _by_loop: weakref.WeakKeyDictionary[
        asyncio.AbstractEventLoop, dict[tuple[str, ...], _Shared]
    ] = weakref.WeakKeyDictionary()

    @classmethod
    def acquire(cls, hosts: DeviceHosts) -> aiohttp.ClientSession:
        """The session for ``hosts`` on the running loop; ``release`` it when done."""
        sessions = cls._by_loop.setdefault(asyncio.get_running_loop(), {})
        shared = sessions.get(hosts.patterns)
        if shared is None or shared.session.closed:
            shared = sessions[hosts.patterns] = _Shared(hosts)
        shared.users += 1
        return shared.session

    @classmethod
    async def release(cls, session: aiohttp.ClientSession) -> None:
        """One user less of ``session``; the last one closes it."""
        sessions = cls._by_loop.get(asyncio.get_running_loop(), {})
        for patterns, shared in list(sessions.items()):
            if shared.session is session:
                shared.users -= 1
                if shared.users <= 0:
                    del sessions[patterns]
                    await session.close()
                return
