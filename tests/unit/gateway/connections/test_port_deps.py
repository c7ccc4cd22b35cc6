"""What a gateway's device links share is the gateway's own: one session, its own tasks."""

from __future__ import annotations

import asyncio

from mowdeck.devices.endpoints import DeviceHosts
from mowdeck.gateway.connections import ConnectionDeps

HOSTS = ["127.0.0.1"]


async def test_the_links_of_one_gateway_share_a_session_closed_with_the_last() -> None:
    deps = ConnectionDeps(DeviceHosts(HOSTS))
    first, second = deps.sessions.acquire(), deps.sessions.acquire()
    assert first is second
    await deps.sessions.release(first)
    assert not first.closed  # one link still uses it
    await deps.sessions.release(second)
    assert first.closed
    again = deps.sessions.acquire()  # a link opened later gets a new one
    assert again is not first
    await deps.close()
    assert again.closed


async def test_two_gateways_share_nothing() -> None:
    one, other = ConnectionDeps(DeviceHosts(HOSTS)), ConnectionDeps(DeviceHosts(HOSTS))
    mine, theirs = one.sessions.acquire(), other.sessions.acquire()
    assert mine is not theirs
    pinging = other.background.spawn(asyncio.sleep(3600))
    await one.close()  # one gateway stops: the other's session and tasks go on
    assert mine.closed
    assert not theirs.closed
    assert not pinging.done()
    await other.close()
    assert theirs.closed
    assert pinging.cancelled()


async def test_a_session_released_after_the_gateway_closed_it_is_left_alone() -> None:
    deps = ConnectionDeps(DeviceHosts(HOSTS))
    old = deps.sessions.acquire()
    await deps.close()
    current = deps.sessions.acquire()
    await deps.sessions.release(old)  # a link closing late must not end the new session
    assert not current.closed
    await deps.close()
