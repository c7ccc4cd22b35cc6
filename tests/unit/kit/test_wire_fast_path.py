"""The fast path's version gate: a tested nats-py passes, any other refuses, off never asks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from mowdeck.kit import wire
from mowdeck.kit.bus import Bus
from mowdeck.kit.settings import BaseSettings, load_settings


@pytest.mark.parametrize(
    "version", ["2.16.0", "2.16.7", "2.16.1rc1"], ids=["release", "patch", "pre-release"]
)
def test_a_tested_minor_passes(version: str) -> None:
    wire.check_nats_py(version)


@pytest.mark.parametrize(
    "version",
    ["2.15.0", "2.17.0", "2.1.6", "2.160.0", "3.16.0", "2.10.0"],
    ids=["older", "newer", "prefix-2.1", "prefix-2.160", "major", "old-pin-floor"],
)
def test_an_untested_version_is_refused_with_what_to_do(version: str) -> None:
    with pytest.raises(wire.UntestedNatsPyError) as err:
        wire.check_nats_py(version)
    message = str(err.value)
    assert f"nats-py {version} is installed" in message
    assert "2.16.x" in message
    assert "MOWDECK_NATS_FAST_PATH=0" in message


def test_the_installed_nats_py_is_a_tested_one() -> None:
    # The pin in pyproject.toml and TESTED_NATS_PY agree: what pip installed passes.
    wire.check_nats_py(wire.installed_nats_py())


def _installed(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "installed_nats_py", lambda: version)


def test_on_an_untested_version_the_fast_client_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _installed("2.15.0", monkeypatch)
    with pytest.raises(wire.UntestedNatsPyError, match=r"nats-py 2\.15\.0"):
        wire.new_client(fast_path=True)


async def test_bus_connect_refuses_before_it_tries_to_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _installed("2.15.0", monkeypatch)
    # Nothing listens on port 1: a connection attempt would fail with another error.
    with pytest.raises(wire.UntestedNatsPyError):
        await Bus.connect("nats://127.0.0.1:1", name="gate", fast_path=True)


def test_off_never_asks_for_the_version(monkeypatch: pytest.MonkeyPatch) -> None:
    def asked() -> str:
        raise AssertionError("the version was looked up with the fast path off")

    monkeypatch.setattr(wire, "installed_nats_py", asked)
    nc = wire.new_client(fast_path=False)
    assert type(nc) is NATS
    assert not wire.is_fast(nc)


def test_on_a_tested_version_the_fast_client_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed("2.16.0", monkeypatch)
    nc = wire.new_client(fast_path=True)
    assert wire.is_fast(nc)
    assert isinstance(nc, NATS)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, True), ("", True), ("1", True), ("true", True), ("0", False), ("false", False)],
    ids=["unset", "empty", "one", "true", "zero", "false"],
)
def test_the_setting_is_on_unless_turned_off(value: str | None, expected: bool) -> None:
    environ = {} if value is None else {"MOWDECK_NATS_FAST_PATH": value}
    assert load_settings(BaseSettings, environ).nats_fast_path is expected


def test_off_imports_nothing_of_nats_py_s_internals_even_where_they_are_missing() -> None:
    # A fresh interpreter with nats-py 2.16's BadHeaderError taken away, as on an older
    # nats-py: every module that uses the client imports, and a stock client is made,
    # without the fast client's module (the only one touching internals) being loaded.
    code = (
        "import sys, nats.errors\n"
        "del nats.errors.BadHeaderError\n"
        "import mowdeck.demo, mowdeck.fleet.service, mowdeck.gateway.service\n"
        "import mowdeck.telemetry.service, mowdeck.kit.publish_window, mowdeck.gateway.lane\n"
        "from mowdeck.kit import wire\n"
        "nc = wire.new_client(fast_path=False)\n"
        "assert not wire.is_fast(nc)\n"
        "assert 'mowdeck.kit._fastclient' not in sys.modules, 'fast client loaded'\n"
        "try:\n"
        "    wire.new_client(fast_path=True)\n"
        "except ImportError:\n"
        "    print('fast path needs 2.16')\n"
    )
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(  # our own interpreter on our own code
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fast path needs 2.16"
