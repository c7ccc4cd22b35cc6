"""A temp folder shared like /tmp but of one test alone, for what the demo starts."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["shared_temp_folder"]


@contextlib.contextmanager
def shared_temp_folder() -> Iterator[Path]:
    """A new world-writable, sticky folder in the system's temp folder; removed afterwards.

    As root the embedded PostgreSQL goes only into such a folder (pytest's ``tmp_path`` is
    private and would send it to /tmp), so a test that checks what the demo leaves behind
    points ``TMPDIR`` here and finds both servers' folders in one place.
    """
    folder = Path(tempfile.mkdtemp(prefix="demo-test-"))
    try:
        folder.chmod(0o1777)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
