"""The ``automower`` connection kind: Husqvarna's Automower Connect API (docs/adapters.md).

``mapping``: pure rules between its attributes and Mowdeck's states and commands.
"""
