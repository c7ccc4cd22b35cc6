"""The ``openmower`` connection kind: OpenMower's MQTT interface (docs/adapters.md).

``mapping``: pure rules between its messages and Mowdeck's states and commands;
``link``: the connection through the broker.
"""

from mowdeck.gateway.connections.openmower.link import OpenMowerConnection

__all__ = ["OpenMowerConnection"]
