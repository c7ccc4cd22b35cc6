"""The operator console in Chromium: against a stand-in with a live stream, and on the demo."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.browser.conftest import ConsoleErrors
from tests.browser.harness import MOWERS, TOKEN, Harness

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1400, "height": 900}


async def _position(page: Any, mower: str) -> tuple[float, float]:
    dot = page.locator(f'#map circle[data-mower="{mower}"]')
    return float(await dot.get_attribute("data-lat")), float(await dot.get_attribute("data-lon"))


async def _wait_for_activity(page: Any, mower: str, activity: str, timeout_s: float) -> None:
    cell = page.locator(f'#mowers tr[data-mower="{mower}"] [data-activity="{activity}"]')
    await cell.wait_for(timeout=timeout_s * 1000)


async def test_the_console_follows_the_live_stream(browser: Any, shots: Path) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        page = await browser.new_page(viewport=VIEWPORT)
        errors = ConsoleErrors(page)
        await page.goto(url)
        await page.locator("#mowers tbody tr").nth(len(MOWERS) - 1).wait_for()
        # The last name is on Fleet's second page.
        await page.locator(
            f'#mowers tr[data-mower="{MOWERS[-1]}"]', has_text="harness-3"
        ).wait_for()
        # The code is used and gone from the address bar; the token is in session storage.
        assert "code=" not in page.url
        assert await page.evaluate("sessionStorage.getItem('mowdeck.token')") == TOKEN
        await page.locator("#link-status.live").wait_for()

        mower = str(MOWERS[0])
        await page.click(f'#mowers tr[data-mower="{mower}"]')
        await page.click("button[data-kind=start_mow]")
        await _wait_for_activity(page, mower, "mowing", 10)
        before = await _position(page, mower)
        await page.wait_for_timeout(1500)
        assert await _position(page, mower) != before, "the mower does not move on the map"
        await page.locator('#timeline li[data-kind="start_mow"] .st-executed').wait_for()
        await page.screenshot(path=str(shots / "console-live-mowing.png"))

        await page.click("#stop-selected")
        await _wait_for_activity(page, mower, "stopped", 10)
        await page.locator('#timeline li[data-kind="emergency_stop"] .st-executed').wait_for()

        harness.notify(MOWERS[0], "harness-1: stuck", "Stuck for 2 minutes.")
        toast = page.locator(".toast-notification", has_text="harness-1: stuck")
        await toast.wait_for(timeout=5000)
        await page.locator("#inbox li", has_text="harness-1: stuck").wait_for()
        await page.screenshot(path=str(shots / "console-live-toast.png"))
        assert errors.seen == []
    finally:
        await harness.stop()


# -- on `mowdeck demo` ---------------------------------------------------------------------


class RunningDemo:
    """A ``mowdeck demo`` subprocess and what its banner printed."""

    def __init__(self, banner: str) -> None:
        self.banner = banner
        found = re.search(r"Console\s+(http://\S+)", banner)
        mower = re.search(r"/v1/mowers/([0-9a-f-]{36})/commands", banner)
        sim = re.search(r"Simulator\s+(http://\S+)/sim/mowers", banner)
        token = re.search(r"export TOKEN=(\S+)", banner)
        assert found and mower and sim and token, banner
        self.token = token.group(1)
        self.console_url = found.group(1)
        self.mower = mower.group(1)
        self.sim_url = sim.group(1)
        origin = self.console_url.split("/?")[0]
        with urllib.request.urlopen(f"{origin}/console/config.json", timeout=10) as answer:  # noqa: S310 - loopback
            self.config: dict[str, Any] = json.loads(answer.read())


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningDemo]:
    """The demo as a person starts it, on free ports, with embedded servers."""
    tmp = tmp_path_factory.mktemp("demo")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MOWDECK_NATS_URL", "MOWDECK_DATABASE_URL", "MOWDECK_JWT_SECRET")
    }
    env["TMPDIR"] = str(tmp)
    command = [sys.executable, "-m", "mowdeck.cli", "demo", "--port", "0", "--mowers", "4"]
    command += ["--state-dir", str(tmp / "state")]
    log = tmp / "demo.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=sink, text=True)
    try:
        assert proc.stdout is not None
        banner = ""
        deadline = time.monotonic() + 120
        while "Ctrl-C" not in banner:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, log.read_text()[-3000:]
            banner += line
            assert time.monotonic() < deadline, banner
        yield RunningDemo(banner)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_the_console_on_the_demo_starts_and_stops_a_mower(
    browser: Any, demo: RunningDemo, shots: Path
) -> None:
    page = await browser.new_page(viewport=VIEWPORT)
    errors = ConsoleErrors(page)
    # The banner prints the console first: a person opens that link and is signed in.
    assert demo.banner.strip().splitlines()[2].strip().startswith("Console")
    await page.goto(demo.console_url)
    row = page.locator(f'#mowers tr[data-mower="{demo.mower}"]')
    await row.wait_for()
    assert await page.locator("#mowers tbody tr").count() == 4
    await row.click()
    await page.click("button[data-kind=start_mow]")
    await page.locator('#timeline li[data-kind="start_mow"] .st-executed').wait_for(timeout=30000)
    await _wait_for_activity(page, demo.mower, "mowing", 90)
    before = await _position(page, demo.mower)
    moved = False
    for _ in range(40):
        await page.wait_for_timeout(500)
        if await _position(page, demo.mower) != before:
            moved = True
            break
    assert moved, "the mower does not move on the map"
    await page.wait_for_timeout(3000)  # a few more track points for the picture
    await page.screenshot(path=str(shots / "console-demo-mowing.png"))

    # The track on the map and the battery chart from Telemetry's history (reloaded
    # every 10 s while the mower is selected).
    assert await page.locator("#map path.track").count() >= 1
    # The chart labels the newest battery figure once history arrived (with a single bin,
    # all of one minute, its band and line have no width: only a dot and the label show).
    await page.locator("#chart text", has_text="%").wait_for(timeout=30000)

    await page.click("#stop-selected")
    await _wait_for_activity(page, demo.mower, "stopped", 30)
    await page.locator('#timeline li[data-kind="emergency_stop"] .st-executed').wait_for()
    await page.screenshot(path=str(shots / "console-demo-stopped.png"))

    # STOP ALL: an emergency stop to every mower of the account, each one stopped.
    await page.click("#stop-all")
    sent = page.locator(".toast-console", has_text="to all 4 mowers")
    await sent.wait_for(timeout=10000)
    await page.wait_for_function(
        """() => [...document.querySelectorAll('#mowers [data-activity]')]
            .every((cell) => ['stopped', 'error'].includes(cell.dataset.activity))""",
        timeout=30000,
    )
    assert errors.seen == []


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_simulated_fault_on_the_demo_shows_a_toast(
    browser: Any, demo: RunningDemo, shots: Path
) -> None:
    if not demo.config.get("notifications_url"):
        pytest.skip(
            "this demo runs no Notifications service: its console has no inbox to show a "
            "notification from (the stand-in test covers the toast)"
        )
    page = await browser.new_page(viewport=VIEWPORT)
    errors = ConsoleErrors(page)
    # The printed code is used up by now: sign in with the printed token instead.
    await page.goto(demo.console_url.split("/?")[0])
    await page.fill("#signin-token", demo.token)
    await page.click("#signin-form button")
    await page.locator(f'#mowers tr[data-mower="{demo.mower}"]').wait_for()
    async with aiohttp.ClientSession() as http:
        fault = {"kind": "error", "code": "lifted"}
        url = f"{demo.sim_url}/sim/mowers/{demo.mower}/faults"
        async with http.post(url, json=fault) as answer:
            assert answer.status == 200, await answer.text()
    # With Realtime the toast comes from the stream, without it from the polled inbox.
    await page.locator(".toast-notification").first.wait_for(timeout=90000)
    await page.locator("#inbox li").first.wait_for()
    await page.screenshot(path=str(shots / "console-demo-toast.png"))
    assert errors.seen == []
