"""Start and stop of a gateway: a start that fails halfway releases what it had started."""

from __future__ import annotations

import socket

import pytest

from mowdeck.gateway.service import GatewayService
from mowdeck.kit.bus import Bus
from tests.integration.gateway.conftest import settings_for
from tests.support.natsserver import NatsServer

pytestmark = pytest.mark.timeout(30)


async def test_a_gateway_whose_start_fails_halfway_releases_what_it_started(
    nats_server: NatsServer,
    bus: Bus,  # the streams, made as the admin step makes them
) -> None:
    with socket.socket() as taken:  # the HTTP port, the last thing a start takes
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        gateway = GatewayService(settings_for(nats_server.url, [], http_port=port))
        with pytest.raises(OSError, match="address already in use"):
            await gateway.start()
    assert gateway.parts.base.bus.nc.is_closed  # the bus it connected itself was drained
    assert not gateway.parts.dispatcher.workers_alive
    assert gateway.parts.seed.task is not None
    assert gateway.parts.seed.task.done()
    assert not gateway.connections
    await gateway.stop()  # again: nothing left to do
