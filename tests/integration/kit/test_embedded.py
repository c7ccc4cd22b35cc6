"""The demo's embedded servers leave no process and no temp folder behind, whatever failed."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mowdeck.kit import embedded
from mowdeck.kit.embedded import EmbeddedError, EmbeddedNats, EmbeddedPostgres


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_nats_server_that_does_not_start_in_time_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pid"
    fake = tmp_path / "nats-server"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(embedded, "nats_server_binary", lambda: str(fake))
    nats = EmbeddedNats()
    store = Path(nats.store_dir)
    with pytest.raises(EmbeddedError, match="did not start within"):
        nats.start(timeout=0.5)
    assert _gone(int(pid_file.read_text()))
    nats.close()
    assert not store.exists()


def test_postgres_closed_before_its_start_removes_its_folder() -> None:
    pg = EmbeddedPostgres()
    folder = pg._dir
    assert folder.exists()
    pg.close()
    assert not folder.exists()


@pytest.mark.slow
def test_postgres_whose_postmaster_died_is_still_removed() -> None:
    pg = EmbeddedPostgres()
    pg.start()
    folder = pg._dir
    pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while embedded._alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    pg.close()  # the package's own cleanup fails here (no such process)
    assert not folder.exists()


@pytest.mark.slow
def test_postgres_close_stops_the_server() -> None:
    pg = EmbeddedPostgres()
    pg.start()
    pid = int((pg._dir / "data" / "postmaster.pid").read_text().split()[0])
    pg.close()
    assert not embedded._alive(pid)
    assert not pg._dir.exists()


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="as root only")
def test_postgres_as_root_keeps_out_of_a_temp_folder_its_owner_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As root the server runs as another user. pytest sets /tmp/pytest-of-root back to 0700
    # at every session start, whoever had opened it: here, all through the start.
    owned = Path(tempfile.mkdtemp(prefix="pytest-of-someone-"))
    owned.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(owned))
    done = threading.Event()

    def sessions_starting() -> None:
        while not done.wait(0.01):
            owned.chmod(0o700)

    closer = threading.Thread(target=sessions_starting)
    closer.start()
    pg = EmbeddedPostgres()
    try:
        pg.start()  # "Permission denied" from initdb when its files are in there
        assert not pg._dir.is_relative_to(owned)
    finally:
        done.set()
        closer.join()
        pg.close()
        shutil.rmtree(owned)
    assert not pg._dir.exists()
