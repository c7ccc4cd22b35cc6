"""The operator console in Chromium: against a stand-in with a live stream, and on the demo."""

from __future__ import annotations

import asyncio
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
from tests.browser.harness import MOWERS, SITES, TOKEN, Harness

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


async def test_an_alarm_acknowledged_in_one_console_shows_acknowledged_in_another(
    browser: Any, shots: Path
) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        pages = []
        for _ in range(2):  # two operators, each in a context of their own
            context = await browser.new_context(viewport=VIEWPORT)
            page = await context.new_page()
            await page.goto(url if not pages else url.split("/?")[0])
            if pages:  # the code is used up: the second one signs in with the token
                await page.fill("#signin-token", TOKEN)
                await page.click("#signin-form button")
            await page.locator("#link-status.live").wait_for()
            pages.append((page, ConsoleErrors(page)))
        alarm = harness.raise_alarm(MOWERS[1], "E42")
        first, second = pages[0][0], pages[1][0]
        row = f'#alarms li[data-alarm="{alarm}"]'
        for page in (first, second):
            await page.locator(row, has_text="harness-2: mower_stuck (error E42)").wait_for(
                timeout=5000
            )
            assert await page.locator(row).get_attribute("class") == "sev-critical alarm-active"
        await page.screenshot(path=str(shots / "console-alarm-raised.png"))
        await first.fill(f'{row} input[data-comment="{alarm}"]', "on my way")
        await first.click(f'{row} button[data-action="acknowledge"]')
        # The other console hears of it from its stream, within a second.
        await second.locator(row, has_text="acknowledged by harness-user").wait_for(timeout=1000)
        assert harness.acknowledged == [(alarm, "on my way")]
        assert await second.locator(f'{row} button[data-action="acknowledge"]').count() == 0
        # The mower's page lists its alarms.
        await second.click(f'#mowers tr[data-mower="{MOWERS[1]}"]')
        await second.locator(
            f'#mower-alarms li[data-alarm="{alarm}"]', has_text="acknowledged by harness-user"
        ).wait_for(timeout=5000)
        assert [errors.seen for _, errors in pages] == [[], []]
    finally:
        await harness.stop()


async def test_first_run_subscription_and_the_settings_round_trip(browser: Any) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        context = await browser.new_context(viewport=VIEWPORT, timezone_id="Europe/Berlin")
        page = await context.new_page()
        errors = ConsoleErrors(page)
        await page.goto(url)
        # Nobody is notified until they subscribe: the console offers it on first use.
        await page.locator("#first-run:not([hidden])").wait_for()
        await page.click("#subscribe-all")
        await page.locator("#first-run").wait_for(state="hidden")
        assert harness.saved[-1]["scope"] == "all"
        assert harness.saved[-1]["timezone"] == "Europe/Berlin"  # the browser's

        await page.click("#open-settings")
        await page.uncheck('#settings-kinds input[value="battery_low"]')
        await page.check('#settings-kinds input[value="job_started"]')
        await page.check('#settings-form input[name="scope"][value="selected"]')
        await page.check(f'#settings-mowers input[value="{MOWERS[2]}"]')
        await page.check("#quiet-on")
        await page.fill("#quiet-start", "21:00")
        await page.fill("#quiet-end", "06:30")
        await page.uncheck("#quiet-critical")
        await page.select_option("#settings-locale", "de")
        await page.click('#settings-form button[type="submit"]')
        await page.locator("#settings").wait_for(state="hidden")
        saved = harness.saved[-1]
        assert (saved["scope"], saved["mowers"], saved["locale"]) == (
            "selected",
            [str(MOWERS[2])],
            "de",
        )
        assert saved["kinds"]["battery_low"] is False and saved["kinds"]["job_started"] is True
        assert saved["quiet_hours"] == {"start": "21:00", "end": "06:30", "allow_critical": False}
        # The console's own texts follow the language chosen.
        await page.locator(".inbox-panel h2", has_text="Alarme").wait_for(timeout=5000)
        assert await page.locator("#open-audit").inner_text() == "Protokoll"
        assert await page.evaluate("document.documentElement.lang") == "de"

        # Where one is told: an ntfy topic added, listed, and removed again.
        await page.click("#open-settings")
        await page.fill("#ntfy-server", "https://ntfy.example")
        await page.fill("#ntfy-topic", "garden-42")
        await page.click("#add-ntfy")
        listed = page.locator(
            "#settings-targets li", has_text="ntfy: https://ntfy.example/garden-42"
        )
        await listed.wait_for(timeout=5000)
        assert [t["topic"] for t in harness.targets] == ["garden-42"]
        await listed.locator("button[data-remove]").click()
        await listed.wait_for(state="detached", timeout=5000)
        assert harness.targets == []
        await page.click("#close-settings")

        # Back again: the form shows what was stored.
        await page.reload()
        await page.click("#open-settings")
        assert await page.is_checked('#settings-kinds input[value="job_started"]')
        assert not await page.is_checked('#settings-kinds input[value="battery_low"]')
        assert await page.is_checked(f'#settings-mowers input[value="{MOWERS[2]}"]')
        assert await page.input_value("#quiet-start") == "21:00"
        assert await page.input_value("#settings-locale") == "de"
        assert await page.locator("#close-settings").inner_text() == "Schließen"
        assert errors.seen == []
    finally:
        await harness.stop()


async def test_the_service_worker_shows_a_push_with_its_tag(browser: Any) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        origin = url.split("/?")[0]
        context = await browser.new_context(viewport=VIEWPORT)
        await context.grant_permissions(["notifications"], origin=origin)
        page = await context.new_page()
        errors = ConsoleErrors(page)
        cdp = await context.new_cdp_session(page)
        registrations: list[str] = []
        cdp.on(
            "ServiceWorker.workerRegistrationUpdated",
            lambda e: registrations.extend(r["registrationId"] for r in e["registrations"]),
        )
        await cdp.send("ServiceWorker.enable")
        await page.goto(url)
        scope = await page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
        assert scope == f"{origin}/"
        assert await page.locator("#enable-push").is_visible()
        manifest = await page.evaluate(
            "fetch(document.querySelector('link[rel=manifest]').href).then((r) => r.json())"
        )
        assert (manifest["start_url"], manifest["display"]) == ("/", "standalone")
        await _until(lambda: bool(registrations))
        # As the push service would deliver one of Notifications' webpush payloads.
        message = {
            "title": "harness-2: stuck",
            "body": "Stuck for 2 minutes.",
            "kind": "mower_stuck",
            "mower_id": str(MOWERS[1]),
            "severity": "critical",
            "tag": "mower_stuck-abc",
            "url": origin + "/",
        }
        for _ in range(2):  # a repeat with the same tag replaces the first
            await cdp.send(
                "ServiceWorker.deliverPushMessage",
                {
                    "origin": origin,
                    "registrationId": registrations[-1],
                    "data": json.dumps(message),
                },
            )
        shown = await page.evaluate(
            """async () => {
                const r = await navigator.serviceWorker.ready;
                for (let i = 0; i < 50; i++) {
                    const found = await r.getNotifications();
                    if (found.length) return found.map((n) => [n.title, n.tag, n.data.mower_id]);
                    await new Promise((done) => setTimeout(done, 100));
                }
                return [];
            }"""
        )
        assert shown == [["harness-2: stuck", "mower_stuck-abc", str(MOWERS[1])]]
        assert errors.seen == []
    finally:
        await harness.stop()


async def test_a_notification_s_click_and_actions_open_the_mower_and_act(browser: Any) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        origin = url.split("/?")[0]
        context = await browser.new_context(viewport=VIEWPORT)
        await context.grant_permissions(["notifications"], origin=origin)
        page = await context.new_page()
        errors = ConsoleErrors(page)
        await page.goto(url)
        await page.locator("#mowers tbody tr").nth(len(MOWERS) - 1).wait_for()
        await page.evaluate("navigator.serviceWorker.ready")
        worker = context.service_workers[0] if context.service_workers else None
        if worker is None:
            worker = await context.wait_for_event("serviceworker")
        alarm_id = harness.raise_alarm(MOWERS[1], "E7")
        # The notification a push of an alarm kind shows offers its actions.
        actions = await worker.evaluate(
            """async (mower) => {
                await self.registration.showNotification("harness-2: stuck", {
                    tag: "mower_stuck-abc",
                    actions: actionsFor({mower_id: mower, kind: "mower_stuck"}),
                    data: {mower_id: mower, kind: "mower_stuck", url: null},
                });
                const [n] = await self.registration.getNotifications({tag: "mower_stuck-abc"});
                return n.actions.map((a) => a.action);
            }""",
            str(MOWERS[1]),
        )
        assert actions == ["acknowledge", "dock"]
        offline = await worker.evaluate(
            "(m) => actionsFor({mower_id: m, kind: 'mower_offline'}).map((a) => a.action)",
            str(MOWERS[1]),
        )
        assert offline == ["acknowledge"]  # an offline mower takes no command
        data = {"mower_id": str(MOWERS[1]), "kind": "mower_stuck", "url": None}
        # "Acknowledge": the console opens on the mower and acknowledges its open alarm.
        await worker.evaluate("(d) => openFor(d, 'acknowledge')", data)
        await _until(lambda: bool(harness.acknowledged))
        assert harness.acknowledged == [(alarm_id, None)]
        await _until_true(page, "!location.search.includes('action=')")
        assert "mower=" in page.url
        # "Dock": the mower is sent home, once.
        await worker.evaluate("(d) => openFor(d, 'dock')", data)
        await _until(lambda: bool(harness.commands_sent))
        assert harness.commands_sent == [(str(MOWERS[1]), "return_to_dock")]
        # A click on the notification itself opens the mower's page, and does nothing else.
        await worker.evaluate("(d) => openFor(d, '')", {**data, "mower_id": str(MOWERS[2])})
        await _until_true(
            page,
            f"location.search === '?mower={MOWERS[2]}'"
            " && document.getElementById('detail-name').textContent === 'harness-3'",
        )
        await page.reload()
        await page.locator("#mowers tbody tr").nth(len(MOWERS) - 1).wait_for()
        assert harness.commands_sent == [(str(MOWERS[1]), "return_to_dock")]
        assert len(harness.acknowledged) == 1
        assert errors.seen == []
    finally:
        await harness.stop()


async def _export(page: Any, folder: Path) -> tuple[str, list[Any]]:
    """Click the audit's export; the file's name and its JSON lines."""
    async with page.expect_download() as waiting:
        await page.click("#audit-export")
    download = await waiting.value
    saved = folder / download.suggested_filename
    await download.save_as(saved)
    return download.suggested_filename, [json.loads(x) for x in saved.read_text().splitlines()]


async def _until_true(page: Any, expression: str, timeout_s: float = 10.0) -> None:
    # Polled from here: a page the service worker navigated refuses wait_for_function's
    # string evaluation under the console's CSP, while evaluate goes through the protocol.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if await page.evaluate(expression):
                return
        except Exception as err:  # a navigation under way destroys the context: try again
            if "context" not in str(err).lower() and "navigat" not in str(err).lower():
                raise
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        await asyncio.sleep(0.05)


async def _until(ready: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_registering_renaming_and_removing_a_mower_from_the_console(browser: Any) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        page = await browser.new_page(viewport=VIEWPORT)
        errors = ConsoleErrors(page)
        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await page.goto(url)
        await page.locator("#mowers tbody tr").nth(len(MOWERS) - 1).wait_for()
        await page.click("#open-register")
        await page.fill("#register-name", "Front lawn")
        await page.select_option("#register-kind", "openmower")
        await page.fill("#register-options", "{}")
        await page.click('#register-form button[type="submit"]')
        # Fleet's 422 names the option, and the form says so.
        await page.locator("#register-error", has_text="connection.options.broker").wait_for()
        await page.fill("#register-options", '{"broker": "mqtt://10.0.0.5:1883"}')
        await page.click('#register-form button[type="submit"]')
        await page.locator("#register-form").wait_for(state="hidden")
        assert harness.registered == [
            {
                "name": "Front lawn",
                "connection": {"kind": "openmower", "options": {"broker": "mqtt://10.0.0.5:1883"}},
            }
        ]
        row = page.locator("#mowers tbody tr", has_text="Front lawn")
        await row.wait_for()
        await row.click()
        await page.fill("#rename", "Back lawn")
        await page.click('#rename-form button[type="submit"]')
        await page.locator("#mowers tbody tr", has_text="Back lawn").wait_for()
        await page.click("#remove-mower")
        await page.locator("#mowers tbody tr", has_text="Back lawn").wait_for(state="detached")
        assert len(harness.removed) == 1
        # The browser logs the refused registration's answer; nothing else went wrong.
        assert [e for e in errors.seen if "422" not in e] == []
    finally:
        await harness.stop()


async def _list_rows(page: Any) -> list[str]:
    """The fleet list as it reads: ``site:<key>`` for a group's row, a mower's id else."""
    return list(
        await page.evaluate(
            """() => [...document.querySelectorAll('#mowers tbody tr')].map((tr) =>
                tr.dataset.group !== undefined ? `site:${tr.dataset.group}` : tr.dataset.mower)"""
        )
    )


async def test_sites_group_the_list_filter_it_and_draw_their_areas(
    browser: Any, shots: Path
) -> None:
    harness = Harness()
    url = await harness.start()
    park, allotment = (str(s) for s in SITES)
    m0, m1, m2 = (str(m) for m in MOWERS)
    try:
        page = await browser.new_page(viewport=VIEWPORT)
        errors = ConsoleErrors(page)
        await page.goto(url)
        await page.locator(f'#mowers tr.group[data-group="{park}"]', has_text="Park").wait_for()
        # Grouped by site, by name; the mowers without a site last; an empty site not at all.
        assert await _list_rows(page) == [f"site:{park}", m0, m1, "site:none", m2]
        assert await page.locator("#map path.area").count() == 0  # no site chosen yet

        await page.select_option("#site-filter", park)
        await page.locator('#map path.area-work-area[data-area="Lawn"]').wait_for()
        await page.locator('#map path.area-stay-out[data-area="Pond"]').wait_for()
        assert await _list_rows(page) == [f"site:{park}", m0, m1]
        assert await page.locator("#mower-count").text_content() == "2 of 3 mowers"
        assert harness.areas_asked == [park]
        assert await page.locator("#map circle.mower").count() == 2
        # The areas and the mowers share the map's projection: the lawn holds both mowers.
        inside = await page.evaluate(
            """() => {
              const lawn = document.querySelector('#map path[data-area="Lawn"]').getBBox();
              return [...document.querySelectorAll('#map circle.mower')].map((c) => {
                const x = Number(c.getAttribute('cx')), y = Number(c.getAttribute('cy'));
                const { x: left, y: top, width, height } = lawn;
                return x > left && x < left + width && y > top && y < top + height;
              });
            }"""
        )
        assert inside == [True, True]
        fill = await page.evaluate(
            """() => getComputedStyle(document.querySelector('#map .area-stay-out')).fill"""
        )
        assert "stay-out-hatch" in fill
        await page.screenshot(path=str(shots / "console-site-areas.png"))

        await page.select_option("#site-filter", "none")
        await page.locator(f'#mowers tr[data-mower="{m0}"]').wait_for(state="detached")
        assert await _list_rows(page) == ["site:none", m2]
        assert await page.locator("#map path.area").count() == 0

        # A mower moves to a site from its detail.
        await page.click(f'#mowers tr[data-mower="{m2}"]')
        await page.select_option("#mower-site", allotment)
        await page.click('#site-form button[type="submit"]')
        await page.locator(f'#mowers tr[data-mower="{m2}"]').wait_for(state="detached")
        assert harness.site_of[MOWERS[2]] == SITES[1]
        await page.select_option("#site-filter", "")
        await page.locator(f'#mowers tr.group[data-group="{allotment}"]').wait_for()
        assert await _list_rows(page) == [f"site:{allotment}", m2, f"site:{park}", m0, m1]
        assert errors.seen == []
    finally:
        await harness.stop()


async def test_the_audit_trail_pages_filters_and_exports(browser: Any, tmp_path: Path) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        page = await browser.new_page(viewport=VIEWPORT, accept_downloads=True)
        errors = ConsoleErrors(page)
        await page.goto(url)
        await page.locator("#mowers tbody tr").nth(len(MOWERS) - 1).wait_for()
        await page.click("#open-audit")
        rows = page.locator("#audit-table tbody tr")
        await rows.nth(1).wait_for()
        assert await rows.count() == 2  # a page, and more to come
        await page.click("#audit-more")
        await rows.nth(2).wait_for()
        assert await page.locator("#audit-more").is_hidden()
        assert await rows.nth(0).locator("td").nth(1).inner_text() == "harness-1"
        # Filtered by kind: the query names it, and only those commands show.
        await page.select_option("#audit-kind", "emergency_stop")
        await page.click('#audit-form button[type="submit"]')
        await _until_true(page, "document.querySelectorAll('#audit-table tbody tr').length === 1")
        assert harness.audit_asked[-1]["kind"] == "emergency_stop"
        name, exported = await _export(page, tmp_path)
        assert [c["kind"] for c in exported] == ["emergency_stop"]
        # The alarms' trail: who acknowledged what, filtered by change, exported too.
        alarm_id = harness.raise_alarm(MOWERS[0], "E7")
        harness.alarms[alarm_id].update(comment="on my way")
        harness._alarm_event(harness.alarms[alarm_id], "acknowledged", by="erin")
        await page.select_option("#audit-trail", "alarms")
        await _until_true(
            page, "document.querySelectorAll('#audit-table tbody tr[data-alarm]').length === 2"
        )
        first = rows.nth(0).locator("td")
        assert await first.nth(2).inner_text() == "error:E7: acknowledged"
        assert (await first.nth(3).inner_text(), await first.nth(4).inner_text()) == (
            "erin",
            "on my way",
        )
        assert await rows.nth(1).locator("td").nth(3).inner_text() == "rules"
        await page.select_option("#audit-kind", "acknowledged")
        await page.click('#audit-form button[type="submit"]')
        await _until_true(
            page, "document.querySelectorAll('#audit-table tbody tr[data-alarm]').length === 1"
        )
        assert harness.audit_asked[-1]["change"] == "acknowledged"
        name, exported = await _export(page, tmp_path)
        assert name == "mowdeck-audit-alarms.ndjson"
        assert [(x["change"], x["by"]) for x in exported] == [("acknowledged", "erin")]
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
    # One row a mower (the site's group rows aside: the demo has a site).
    assert await page.locator("#mowers tbody tr[data-mower]").count() == 4
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
    await _until_true(
        page,
        """() => [...document.querySelectorAll('#mowers [data-activity]')]
            .every((cell) => ['stopped', 'error'].includes(cell.dataset.activity))""",
        timeout_s=30,
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


async def test_the_console_shows_each_mower_s_brand_and_marks_a_stop_that_pauses(
    browser: Any,
) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        page = await browser.new_page(viewport=VIEWPORT)
        errors = ConsoleErrors(page)
        await page.goto(url)
        own, automower, openmower = (f'#mowers tr[data-mower="{m}"]' for m in MOWERS)
        await page.locator(automower, has_text="Husqvarna Automower · 435X AWD").wait_for()
        await page.locator(f"{openmower} [data-brand=openmower]", has_text="OpenMower").wait_for()
        assert await page.locator(f"{own} [data-brand=simulator]").inner_text() == (
            "Mowdeck · simulated"
        )
        marked = page.locator("#mowers [data-stop-is-pause]")
        assert await marked.count() == 2
        assert await page.locator(f"{own} [data-stop-is-pause]").count() == 0
        assert "no remote emergency stop" in (await marked.first.get_attribute("title") or "")
        await page.click(openmower)
        await page.locator("#detail-brand", has_text="OpenMower (stop = pause)").wait_for()
        await page.click(own)
        await page.locator("#detail-brand", has_text="Mowdeck · simulated").wait_for()
        assert errors.seen == []
    finally:
        await harness.stop()


async def test_an_automower_alarm_reads_as_the_vendor_s_words_in_the_user_s_language(
    browser: Any,
) -> None:
    harness = Harness()
    url = await harness.start()
    try:
        page = await browser.new_page(viewport=VIEWPORT)
        errors = ConsoleErrors(page)
        await page.goto(url)
        await page.locator("#link-status.live").wait_for()
        alarm = harness.raise_alarm(MOWERS[1], "automower.71")
        row = page.locator(f'#alarms li[data-alarm="{alarm}"]')
        await row.filter(
            has_text="harness-2: mower_stuck (error automower.71: Alarm! Mower lifted)"
        ).wait_for(timeout=5000)
        other = harness.raise_alarm(MOWERS[0], "blade_jammed")
        await page.locator(
            f'#alarms li[data-alarm="{other}"]', has_text="(error blade_jammed)"
        ).wait_for(timeout=5000)
        assert errors.seen == []
    finally:
        await harness.stop()
