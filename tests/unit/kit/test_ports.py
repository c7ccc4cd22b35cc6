"""Free ports: outside the kernel's ephemeral range, never the same one twice in a row."""

from __future__ import annotations

import socket

import pytest

from mowdeck.kit import ports


def test_a_free_port_is_bindable_below_the_ephemeral_range_and_not_handed_out_twice() -> None:
    low, _ = ports._ephemeral_range()
    handed = [ports.free_port() for _ in range(200)]
    assert len(set(handed)) == len(handed)
    if low - ports._LOWEST >= 1024:
        assert all(ports._LOWEST <= port < low for port in handed)
    with socket.socket() as server:
        server.bind(("127.0.0.1", handed[-1]))


def test_a_port_something_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        # Every random choice lands on the busy port: the kernel's choice is taken instead.
        monkeypatch.setattr(ports._RANDOM, "randrange", lambda _a, _b: taken)
        assert ports.free_port() != taken
