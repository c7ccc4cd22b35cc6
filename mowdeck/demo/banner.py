"""What the demo prints for a person: the console, the token, the URLs and commands to paste."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import TYPE_CHECKING

from mowdeck.demo.auth import DEMO_ACCOUNT, DEMO_USER
from mowdeck.demo.brands import BRANDS
from simulator.fleet import SimulatorFleet

if TYPE_CHECKING:
    from mowdeck.demo.running import Demo

__all__ = ["banner", "brands_text", "ready_mower"]


def ready_mower(
    fleet: SimulatorFleet, busy: Collection[uuid.UUID] = ()
) -> tuple[uuid.UUID | None, str]:
    """The mower the banner's examples use: one that leaves the dock at once, if any.

    A docked mower below its resume level charges first; a start is executed at once but
    the state reads ``charging`` until the battery reaches that level. Mowers in ``busy``
    (the demo's scenario commands them) are taken only when no other is left.
    """
    free = [m for m in fleet.mowers if m.mower_id not in busy] or fleet.mowers
    if not free:
        return None, ""
    fullest = max(free, key=lambda m: m.body.battery)
    level = fullest.params.resume_level
    if fullest.body.battery >= level:
        return fullest.mower_id, ""
    return fullest.mower_id, (
        f"this mower is charging at {fullest.body.battery:.0f} %: it leaves the dock at "
        f"{level:.0f} %, so its state reads charging for a while after executed"
    )


def brands_text(demo: Demo) -> str:
    """Which mowers are of which brand and how each brand is reached."""
    b = demo.brands
    counts = b.counts() if b is not None else {"Mowdeck": len(demo.mowers)}
    lines = [f"Mowers by brand ({', '.join(f'{n} {brand}' for brand, n in counts.items())}):"]
    lines.append(f"  Mowdeck        Mowdeck's device protocol, served by {demo.sim_url}")
    if b is not None and b.openmower is not None:
        prefix = (
            b.openmower.bridges[0].topics.prefix.rsplit("/", 2)[0] if b.openmower.bridges else ""
        )
        lines.append(
            f"  OpenMower      MQTT on {b.broker}, topics {prefix}/<mower id>/... "
            "(robot_state/json, actions/json, action)"
        )
    if b is not None and b.broker_note:
        lines.append(f"  OpenMower      none: {b.broker_note}")
    if b is not None and b.automower is not None:
        cloud = b.automower.cloud.base
        lines.append(
            f"  Automower      a stand-in Automower Connect cloud on {cloud} (token "
            f"/auth/v1/oauth2/token, REST /api/v1, WebSocket /ws/v1); its application keys in"
        )
        lines.append(f"                 {b.state_dir / 'credentials'}; one request a second each")
    others: dict[str, str] = {}  # the first mower of each other brand, for the examples
    for m, kind in b.kinds.items() if b is not None else ():
        if kind != "simulator":
            others.setdefault(kind, m)
    for kind, m in sorted(others.items()):
        lines.append(f"  e.g. {BRANDS[kind]:<24} {m}")
    if b is not None and (b.openmower is not None or b.automower is not None):
        lines.append(
            "  OpenMower and Automower mowers have no remote emergency stop: theirs is a pause"
        )
        lines.append("  (docs/gateway.md says what that does and does not guarantee).")
    return "\n".join(lines)


def banner(demo: Demo) -> str:
    """What to print for a person: the console, the token, the URLs and commands to paste."""
    m = demo.example or (demo.mowers[0] if demo.mowers else uuid.UUID(int=0))
    cmd = f"{demo.fleet_url}/v1/mowers/{m}/commands?wait=10"
    json_body = "-H 'Content-Type: application/json' -d"
    if demo.key_file:
        lasting = (
            f"  It is signed with the key in {demo.key_file}: tokens of earlier runs keep\n"
            "  working for their 24 hours (delete the file for a new key)."
        )
    else:
        lasting = "  It is signed with the key MOWDECK_JWT_* configures."
    waits = f"\n  ({demo.example_waits})" if demo.example_waits else ""
    metrics = "\n".join(f"  {job:<14} {url}/metrics" for job, url in demo.metrics_urls().items())
    if demo.prometheus_url:
        scraped = (
            f"Prometheus     {demo.prometheus_url}  (scrapes the endpoints above every 5 s;"
            f" {demo.prometheus_rules} rule files loaded: {demo.prometheus_url}/alerts)"
        )
    else:
        scraped = "(mowdeck demo --prometheus starts a Prometheus scraping them, rules loaded)"
    return f"""
Mowdeck demo is running with {len(demo.mowers)} simulated mowers.

  Console        {demo.console_url}
                 (open it in a browser: the code signs you in once, within 10 minutes;
                 afterwards open {demo.realtime_url}/ and paste the token below)

  Fleet          {demo.fleet_url}
  Telemetry      {demo.telemetry_url}
  Notifications  {demo.notifications_url}
  Gateway        {demo.gateway_url}
  Simulator      {demo.sim_url}/sim/mowers
  Realtime       {demo.realtime_url}/v1/stream

{brands_text(demo)}

Metrics (Prometheus text format):
{metrics}
{scraped}

Development token (user "{DEMO_USER}", account {DEMO_ACCOUNT}, admin), valid 24 hours:
  export TOKEN={demo.token}
  export AUTH="Authorization: Bearer $TOKEN"
{lasting}

Try (command kinds: start_mow, pause_mow, resume_mow, return_to_dock, emergency_stop,
set_blade_height, set_speed, manual_drive; see docs/fleet.md):
  curl -s {demo.fleet_url}/v1/mowers -H "$AUTH"
  curl -s -X POST "{cmd}" -H "$AUTH" {json_body} '{{"command": {{"kind": "start_mow"}}}}'{waits}
  curl -s {demo.telemetry_url}/v1/mowers/{m}/state -H "$AUTH"
  curl -s {demo.telemetry_url}/v1/mowers/{m}/commands -H "$AUTH"
  curl -s "{demo.telemetry_url}/v1/mowers/{m}/history?step=1m" -H "$AUTH"
  curl -s "{demo.telemetry_url}/v1/mowers/{m}/track" -H "$AUTH"
  curl -s -X POST "{cmd}" -H "$AUTH" {json_body} '{{"command": {{"kind": "emergency_stop"}}}}'
  curl -s {demo.sim_url}/sim/mowers/{m}
  curl -sN {demo.realtime_url}/v1/stream -H "$AUTH"

Notifications: user "{DEMO_USER}" is subscribed to all mowers. Within a few minutes a
short job finishes, a mower runs low on battery and one gets stuck (an injected fault):
  curl -s {demo.notifications_url}/v1/notifications/inbox -H "$AUTH"
  curl -s {demo.notifications_url}/metrics | grep mowdeck_notifications_events_total

Ctrl-C stops everything and removes what the demo started.
"""
