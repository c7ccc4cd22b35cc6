"""The ``automower`` connection kind: Husqvarna's Automower Connect API (docs/adapters.md).

``mapping``: pure rules between its attributes and Mowdeck's states and commands;
``account``: one link per credential (token, WebSocket, request budget) shared by its
mowers; ``link``: one mower's connection through it.
"""

from mowdeck.gateway.connections.automower.link import AutomowerConnection

__all__ = ["AutomowerConnection"]
