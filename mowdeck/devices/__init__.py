"""What Fleet and the gateway both know of devices, so neither imports the other.

``kinds.py``: the connection kinds, each declared once (which option names the device,
which type its options have); ``endpoints.py``: the device hosts a connection may dial and
the endpoint key that names a device; ``credentials.py``: how a connection names a secret;
``openmower.py``: the ``openmower`` kind's options; ``automower.py``: the ``automower``
kind's options and cloud endpoints. A new protocol declares its kind here;
its adapter, which dials, stays in the gateway (``mowdeck/gateway/connections/``).
"""
