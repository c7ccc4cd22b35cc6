"""Free TCP ports for servers started a little later (the demo's, the tests')."""

from __future__ import annotations

import collections
import random
import socket
import threading
from pathlib import Path

__all__ = ["free_port"]

# Ports handed out lately by this process, never handed out again while remembered: two
# servers of one start must not be given the same port.
_RECENT: collections.deque[int] = collections.deque(maxlen=4096)
_LOCK = threading.Lock()
_RANDOM = random.Random()
# Below the kernel's ephemeral range, at most this many ports are tried.
_LOWEST = 15000
_TRIES = 64


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at ``host`` now, for a server started a little later.

    Chosen below the kernel's ephemeral range: a port the kernel picks for ``bind(0)`` can
    be the local port of the next outgoing connection (to NATS, to PostgreSQL) before the
    server binds it, and then the server's bind fails with "address already in use". Where
    the ephemeral range leaves no room below it, the kernel's choice is taken.
    """
    low, _ = _ephemeral_range()
    with _LOCK:
        if low - _LOWEST >= 1024:
            for _ in range(_TRIES):
                port = _RANDOM.randrange(_LOWEST, low)
                if port not in _RECENT and _bindable(host, port):
                    _RECENT.append(port)
                    return port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        while True:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((host, 0))
                port = int(probe.getsockname()[1])
            if port not in _RECENT:
                _RECENT.append(port)
                return port
