"""A real Mosquitto broker on a free port, started by the tests that need one.

Debian's ``mosquitto`` package provides the binary (``apt-get install mosquitto``).
Without it the tests that use the fixture are skipped with that reason, unless
``MOWDECK_REQUIRE_MOSQUITTO=1`` (as CI sets it), which makes a missing broker a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from mowdeck.kit.ports import free_port

__all__ = ["Mosquitto", "mosquitto_binary", "running_mosquitto"]

_PLACES = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")


def mosquitto_binary() -> str:
    """The ``mosquitto`` binary; skips (or fails under MOWDECK_REQUIRE_MOSQUITTO=1) without."""
    found = shutil.which("mosquitto") or next((p for p in _PLACES if Path(p).exists()), None)
    if found is None:
        reason = "no mosquitto binary (apt-get install mosquitto)"
        if os.environ.get("MOWDECK_REQUIRE_MOSQUITTO") == "1":
            pytest.fail(f"MOWDECK_REQUIRE_MOSQUITTO=1 but {reason}")
        pytest.skip(reason)
    return found


class Mosquitto:
    """One broker process on 127.0.0.1:``port``."""

    def __init__(self, directory: Path, users: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.port = free_port()
        self.users = users
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    async def start(self) -> None:
        binary = mosquitto_binary()
        lines = [f"listener {self.port} 127.0.0.1", "persistence false"]
        if os.geteuid() == 0:
            # As root, mosquitto drops to the user "mosquitto", who cannot read the test's
            # private temporary directory (its password file).
            lines.append("user root")
        if self.users:
            passwords = self.directory / "passwords"
            passwords.write_text("")
            for user, password in self.users.items():
                subprocess.run(  # noqa: ASYNC221 - a short local tool, before the broker runs
                    ["mosquitto_passwd", "-b", str(passwords), user, password], check=True
                )
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        config = self.directory / "mosquitto.conf"
        config.write_text("\n".join(lines) + "\n")
        self._process = subprocess.Popen(  # noqa: ASYNC220 - started once, waited on below
            [binary, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        for _ in range(200):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                if self._process.poll() is not None:
                    err = self._process.stderr.read().decode() if self._process.stderr else ""
                    raise RuntimeError(f"mosquitto exited: {err}") from None
                await asyncio.sleep(0.025)
            else:
                writer.close()
                return
        raise RuntimeError("mosquitto did not listen within 5 s")

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                await asyncio.wait_for(asyncio.to_thread(process.wait), 5)
            except TimeoutError:
                process.kill()
        if process is not None and process.stderr is not None:
            process.stderr.close()


@asynccontextmanager
async def running_mosquitto(
    directory: Path, users: dict[str, str] | None = None
) -> AsyncIterator[Mosquitto]:
    """A started broker, stopped at the end."""
    broker = Mosquitto(directory, users)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
