"""The HTTP session device links dial through: no redirect, no host the allow-list refuses.

aiohttp's ``ws_connect`` follows redirects (it calls ``request()`` with its defaults, and
takes no ``allow_redirects``), so an endpoint on an allowed host answering ``302`` would make
the gateway request whatever address it named, on every reconnect. aiohttp runs a
session's client middlewares for every hop of a request, redirects included: the one here
checks each request's URL against ``MOWDECK_GATEWAY_DEVICE_HOSTS`` before it is sent (the
gateway checked the registration at apply; this holds whoever built the connection) and
refuses any ``3xx`` answer instead of following it.

One session per gateway, shared by its links and closed with the last of them: a shard
holds thousands of links. The gateway's composition owns it (``ConnectionDeps``), so two
gateways in one process share nothing.
"""

from __future__ import annotations

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


class DeviceSessions:
    """The session the device links of one gateway dial through, opened by the first link
    and closed with the last (``acquire``/``release``), or by ``close`` at the end."""

    __slots__ = ("_session", "_users", "hosts")

    def __init__(self, hosts: DeviceHosts) -> None:
        self.hosts = hosts
        self._session: aiohttp.ClientSession | None = None
        self._users = 0

    def acquire(self) -> aiohttp.ClientSession:
        """The session (on the running loop); ``release`` it when done."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                # The simulator's mowers are many per host: no per-host connection limit.
                connector=aiohttp.TCPConnector(limit=0),
                middlewares=(guard(self.hosts),),
            )
            self._users = 0
        self._users += 1
        return self._session

    async def release(self, session: aiohttp.ClientSession) -> None:
        """One user less of ``session``; the last one closes it."""
        if session is not self._session:
            return  # a session closed already (``close``), replaced since
        self._users -= 1
        if self._users <= 0:
            await self.close()

    async def close(self) -> None:
        """Close the session, whoever still uses it (the gateway stops)."""
        session, self._session, self._users = self._session, None, 0
        if session is not None:
            await session.close()
