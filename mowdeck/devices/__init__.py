"""What Fleet and the gateway both know of devices, so neither imports the other.

``kinds.py``: the connection kinds, each declared once (which option names the device);
``endpoints.py``: the device hosts a connection may dial and the endpoint key that names a
device. A new protocol declares its kind here (and its credential references, when it has
any); its adapter, which dials, stays in the gateway (``mowdeck/gateway/connections/``).
"""
