"""Chromium through Playwright, or a skip saying why (a failure if MOWDECK_REQUIRE_BROWSER=1)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("MOWDECK_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _unavailable(reason: str) -> None:
    if os.environ.get("MOWDECK_REQUIRE_BROWSER") == "1":
        pytest.fail(f"MOWDECK_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def _chromium() -> str | None:
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium (Debian's, never a downloaded one)."""
    try:
        from playwright.async_api import async_playwright  # noqa: PLC0415 - optional
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright)")
    path = _chromium()
    if path is None:
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=path, args=ARGS)
        try:
            yield chromium
        finally:
            await chromium.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: MOWDECK_BROWSER_SHOTS, else the test's temporary folder."""
    folder = Path(os.environ.get("MOWDECK_BROWSER_SHOTS", tmp_path / "shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class ConsoleErrors:
    """What the page reported as errors (console errors and uncaught exceptions)."""

    def __init__(self, page: Any) -> None:
        self.seen: list[str] = []
        page.on("console", lambda m: self.seen.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.seen.append(f"uncaught: {e}"))
