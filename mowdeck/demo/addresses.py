"""Where the demo listens and what it may dial: the device hosts, the console's
origins."""

from __future__ import annotations

__all__ = ["console_origins", "device_hosts"]


def device_hosts(host: str, port: int) -> list[str]:
    """``MOWDECK_GATEWAY_DEVICE_HOSTS`` for a simulator on ``host:port``: that port only.

    Listing the whole host would let a registration dial any service of the machine the
    demo runs on (its PostgreSQL, its NATS).
    """
    return [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]


def console_origins(host: str, port: int) -> list[str]:
    """The origins a browser may load the console from, served on ``host:port``."""
    names = {host, "localhost", "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {host}
    return sorted(f"http://{name}:{port}" for name in names)
