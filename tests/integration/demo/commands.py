"""A command through the running demo, as a person pasting the banner's example would."""

from __future__ import annotations

from typing import Any

import aiohttp

from mowdeck import demo


async def command_through(running: demo.Demo) -> dict[str, Any]:
    """Post a command to the example mower and wait for its final result; returns it."""
    # A command crosses four users' permissions: Fleet publishes it, the gateway executes
    # it and publishes the result, Fleet's waiting request hears the result.
    example = running.example or running.mowers[0]
    url = f"{running.fleet_url}/v1/mowers/{example}/commands?wait=20"
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
        http.post(url, json={"command": {"kind": "set_blade_height", "height_mm": 40}}) as r,
    ):
        body: dict[str, Any] = await r.json()
    # 200 with a final status ("executed", or "failed" by the mower), not 202 "pending".
    assert r.status == 200, body
    assert body["status"] in {"executed", "failed", "rejected"}, body
    return body
