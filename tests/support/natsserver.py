"""A real ``nats-server`` with JetStream on a free port, for tests that may stop and restart it."""

from mowdeck.kit.embedded import EmbeddedNats as NatsServer
from mowdeck.kit.embedded import nats_server_binary
from mowdeck.kit.ports import free_port

__all__ = ["NatsServer", "free_port", "nats_server_binary"]
