"""The console's schedules in Chromium: a mower's week, its next start and what holds it
back, park and resume, a site's restrictions (against the stand-in services)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mowdeck.kit.http import Problem
from tests.browser.conftest import ConsoleErrors
from tests.browser.harness import MOWERS, TOKEN, Harness

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1400, "height": 900}
SITE = str(uuid.UUID(int=77, version=4))


class ScheduleHarness(Harness):
    """The stand-in with Fleet's schedule routes: one scheduled mower at a site."""

    def __init__(self) -> None:
        super().__init__()
        self.overrides: list[tuple[str, str]] = []  # (path, override) as asked
        self.restrictions: list[dict[str, Any]] = []
        self.hold: str | None = None
        self.next_start = (datetime.now(UTC) + timedelta(days=1)).replace(
            hour=6, minute=30, second=0, microsecond=0
        )

    def schedule_of(self, mower: str) -> dict[str, Any]:
        """The first mower's schedule; the others have none (an empty one)."""
        return self._view() if mower == str(MOWERS[0]) else super().schedule_of(mower)

    def _view(self) -> dict[str, Any]:
        restricted = None
        if self.restrictions:
            r = self.restrictions[0]
            restricted = {"reason": r["reason"], "until": r["until"]}
        elif self.hold is not None:
            restricted = {"reason": self.hold, "until": None}
        return {
            "mower_id": str(MOWERS[0]),
            "site_id": SITE,
            "enabled": True,
            "timezone": "Europe/Berlin",
            "tasks": [
                {
                    "start": "08:30",
                    "duration_minutes": 90,
                    "days": ["mon", "wed", "fri"],
                    "work_area": "front",
                },
                {"start": "23:00", "duration_minutes": 120, "days": ["sat"]},
            ],
            "next_start": None if self.hold else self.next_start.isoformat(),
            "restricted": restricted,
            "recent_slots": [],
            "updated_at": datetime.now(UTC).isoformat(),
        }

    def _routes(self) -> list[web.RouteDef]:
        def authed(request: web.Request) -> None:
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                raise Problem(401, "Unauthorized", "no token")

        async def override(request: web.Request) -> web.Response:
            authed(request)
            body = await request.json()
            self.overrides.append((request.path, body["override"]))
            self.hold = None if body["override"] == "resume_schedule" else body["override"]
            return web.json_response({"override": body["override"], "mowers": 1, "command_ids": []})

        async def restrictions(request: web.Request) -> web.Response:
            authed(request)
            return web.json_response({"restrictions": self.restrictions})

        async def restrict(request: web.Request) -> web.Response:
            authed(request)
            body = await request.json()
            made = {
                "restriction_id": str(uuid.uuid4()),
                "site_id": request.match_info["site_id"],
                "reason": body["reason"],
                "until": body["until"],
                "created_at": datetime.now(UTC).isoformat(),
                "created_by": "user:harness",
                "docked": [],
            }
            self.restrictions.append(made)
            return web.json_response(made, status=201)

        async def lift(request: web.Request) -> web.Response:
            authed(request)
            rid = request.match_info["restriction_id"]
            self.restrictions = [r for r in self.restrictions if r["restriction_id"] != rid]
            return web.Response(status=204)

        return [
            *super()._routes(),
            web.post("/v1/mowers/{mower_id}/schedule/override", override),
            web.post("/v1/sites/{site_id}/schedule/override", override),
            web.get("/v1/sites/{site_id}/restrictions", restrictions),
            web.post("/v1/sites/{site_id}/restrictions", restrict),
            web.delete("/v1/sites/{site_id}/restrictions/{restriction_id}", lift),
        ]


async def test_a_mowers_week_its_park_and_its_sites_restrictions(browser: Any, shots: Path) -> None:
    harness = ScheduleHarness()
    url = await harness.start()
    try:
        page = await browser.new_page(viewport=VIEWPORT)
        errors = ConsoleErrors(page)
        await page.goto(url)
        mower = str(MOWERS[0])
        await page.locator(f'#mowers tr[data-mower="{mower}"]').wait_for()
        await page.click(f'#mowers tr[data-mower="{mower}"]')
        week = page.locator("#schedule-week")
        await week.wait_for()
        for day in ("mon", "wed", "fri"):
            slot = week.locator(f'td[data-day="{day}"] .slot', has_text="08:30\u201310:00")
            await slot.wait_for()
        assert await week.locator('td[data-day="tue"] .slot').count() == 0
        await week.locator('td[data-day="sat"] .slot', has_text="23:00\u201301:00 +1").wait_for()
        await page.locator("#schedule-next", has_text="Next start:").wait_for()
        assert await page.locator("#schedule-week th.next").count() == 1
        await page.screenshot(path=str(shots / "console-schedule.png"))

        await page.click("#park-further")
        await page.locator(
            "#schedule-restricted", has_text="parked until further notice"
        ).wait_for()
        await page.locator("#schedule-next", has_text="No start ahead").wait_for()
        await page.click("#resume-schedule")
        await page.locator("#schedule-next", has_text="Next start:").wait_for()
        await page.click("#park-site")
        assert harness.overrides == [
            (f"/v1/mowers/{mower}/schedule/override", "park_until_further_notice"),
            (f"/v1/mowers/{mower}/schedule/override", "resume_schedule"),
            (f"/v1/sites/{SITE}/schedule/override", "park_until_further_notice"),
        ]
        await page.click("#resume-site")
        # The resume re-reads and redraws the schedule (its restriction form included):
        # wait for that redraw before typing into the form. The panel is drawn once when
        # the mower is selected and once after each answered override: this is the fifth.
        await page.locator('#schedule-panel[data-renders="5"]').wait_for(state="attached")
        assert len(harness.overrides) == 4
        await page.locator("#schedule-next", has_text="Next start:").wait_for()

        await page.select_option("#restriction-reason", "rain")
        until = (datetime.now() + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")  # noqa: DTZ005 - the browser's local time
        await page.fill("#restriction-until", until)
        await page.click("#restriction-form button[type=submit]")
        await page.locator("#site-restrictions li", has_text="rain until").wait_for()
        await page.locator("#schedule-restricted", has_text="Not mowing: rain until").wait_for()
        assert len(harness.restrictions) == 1
        assert datetime.fromisoformat(harness.restrictions[0]["until"]) > datetime.now(UTC)
        await page.screenshot(path=str(shots / "console-schedule-restricted.png"))
        await page.click("#site-restrictions li button")
        await page.locator("#site-restrictions li").wait_for(state="detached")
        assert harness.restrictions == []

        await page.click(f'#mowers tr[data-mower="{MOWERS[1]}"]')
        await page.locator("#schedule-status", has_text="No schedule").wait_for()
        assert errors.seen == []
    finally:
        await harness.stop()
