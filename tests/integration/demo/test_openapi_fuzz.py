"""Schemathesis against every HTTP API of a running system, from the documents it serves.

The whole demo runs (an embedded NATS, the test PostgreSQL, simulated mowers); each service
is fuzzed with every check on (no 5xx, responses as documented, every status documented,
schema-violating requests refused...), real mower ids in the paths and a valid token.

Not run: the streams (``/v1/stream``, ``/v1/ws``, a mower's ``/mowers/{id}/ws``), which the
documents describe but which answer for as long as the client listens.

One check is held looser where no schema can say what is valid: a request can match its
schema and still be refused, with a 400 or 422 naming the field, when validity depends on
what exists or on the service's settings. ``SEMANTIC`` lists each such operation and why.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from mowdeck import demo
from mowdeck.commands.contracts import render_openapi
from tests.integration.demo.test_demo_start import _args

_SCHEMATHESIS = Path(sys.executable).parent / "st"  # installed with the dev extra
_EXAMPLES = int(os.environ.get("MOWDECK_FUZZ_EXAMPLES", "50"))
_STREAMS = r"^/(v1/(stream|ws)|mowers/\{mower_id\}/ws)$"
_CURSOR = "a cursor is opaque: only one the API gave out is valid (400 naming it)"
_TIMES = "`from`/`to` must lie in the range any query may name (kit.times; 422 naming it)"
SEMANTIC: dict[str, tuple[tuple[int, ...], str]] = {
    "GET /v1/mowers": ((400,), _CURSOR),
    "GET /v1/audit": ((400, 422), f"{_CURSOR}; {_TIMES}"),
    "GET /v1/audit/export": ((422,), _TIMES),
    "POST /v1/mowers": (
        (422,),
        "the connection kind must be installed and its URL one the "
        "gateways may dial (MOWDECK_GATEWAY_DEVICE_HOSTS)",
    ),
    "PATCH /v1/mowers/{mower_id}": ((422,), "as POST /v1/mowers"),
    "POST /v1/mowers/{mower_id}/commands": (
        (422,),
        "`wait` at most the configured maximum; `ttl_s` long enough to send the command",
    ),
    "GET /v1/sites": ((400,), _CURSOR),
    "POST /v1/sites": ((422,), "a time zone the system knows (zoneinfo)"),
    "PATCH /v1/sites/{site_id}": ((422,), "a time zone the system knows (zoneinfo)"),
    "PUT /v1/sites/{site_id}/areas": (
        (422,),
        "closed rings, polygons valid by OGC rules (shapely), unique names, at most 10,000 "
        "positions a site: a 422 naming the feature",
    ),
    "PUT /v1/sites/{site_id}/members/{user_id}": ((422,), "a user id has no `:#*` or space"),
    "DELETE /v1/sites/{site_id}/members/{user_id}": ((422,), "as PUT"),
    "PUT /v1/mowers/{mower_id}/schedule": (
        (422,),
        "a time zone the system knows, and only for a mower without a site; days not repeated;"
        " tasks that do not overlap",
    ),
    "POST /v1/sites/{site_id}/restrictions": ((422,), "`until` must lie in the future"),
    "GET /v1/states": ((400,), _CURSOR),
    "GET /v1/mowers/{mower_id}/history": (
        (422,),
        f"{_TIMES}; `step` above zero and a window of at most the row limit's bins",
    ),
    "GET /v1/mowers/{mower_id}/track": ((422,), _TIMES),
    "GET /v1/mowers/{mower_id}/commands": ((422,), _TIMES),
    "GET /v1/notifications/inbox": ((400,), _CURSOR),
    "GET /v1/notifications/targets": ((400,), _CURSOR),
    "GET /v1/alarms": ((400,), _CURSOR),
    "PUT /sim/mowers/{mower_id}/areas": (
        (422,),
        "closed rings of at least 4 positions, polygons valid by OGC rules (shapely)",
    ),
    "GET /v1/alarms/audit": ((400, 422), f"{_CURSOR}; {_TIMES}"),
    "GET /v1/alarms/audit/export": ((422,), _TIMES),
    "POST /v1/alarms/{alarm_id}/assign": ((422,), "an assignee who may view the alarm's mower"),
    "POST /v1/notifications/targets": ((422,), "the server must resolve to an allowed host"),
    "PUT /v1/notifications/preferences": (
        (404, 422),
        "a time zone the system knows; mowers visible to the caller",
    ),
    "POST /console/exchange": ((400,), "only a sign-in code the demo handed out is valid"),
}
_GENERATED = re.compile(r"(\d+) generated")


def _config(mower_id: str) -> str:
    lines = ["[parameters]", f'"path.mower_id" = "{mower_id}"', ""]
    for name, (statuses, _why) in SEMANTIC.items():
        accepted = ["2xx", "3xx", "401", "403", "404", "409", "429", *map(str, statuses)]
        lines += [
            "[[operations]]",
            f'include-name = "{name}"',
            f"checks.positive_data_acceptance.expected-statuses = {json.dumps(accepted)}",
            "",
        ]
    return "\n".join(lines)


async def _fuzz(url: str, token: str, config: Path) -> tuple[int, str]:
    # A subprocess, so that this event loop keeps serving the system under test.
    proc = await asyncio.create_subprocess_exec(
        str(_SCHEMATHESIS),
        "--config-file",
        str(config),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "all",
        "--max-examples",
        str(_EXAMPLES),
        "--exclude-path-regex",
        _STREAMS,
        "--seed",
        os.environ.get("MOWDECK_FUZZ_SEED", "31"),
        "--no-color",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=config.parent,  # its cache of failures stays with the test's files
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_every_api_holds_to_its_document_under_fuzzing(
    monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path
) -> None:
    monkeypatch.delenv("MOWDECK_NATS_URL", raising=False)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    committed = {
        name.removesuffix(".json"): json.loads(text)
        for name, text in render_openapi().items()
        if name.endswith(".json")
    }
    async with demo.running_demo(_args()) as running:
        services = {
            "telemetry": (running.telemetry_url, running.mowers[0]),
            "notifications": (running.notifications_url, running.mowers[0]),
            "realtime": (running.realtime_url, running.mowers[0]),
            "simulator": (running.sim_url, running.mowers[0]),
            # Last: it removes the mower it is given.
            "fleet": (running.fleet_url, running.mowers[1]),
        }
        failures, total = [], 0
        async with aiohttp.ClientSession() as http:
            for name, (url, mower_id) in services.items():
                async with http.get(f"{url.rstrip('/')}/openapi.json") as response:
                    assert response.status == 200, name
                    assert await response.json() == committed[name], name
                config = tmp_path / f"{name}.toml"
                config.write_text(_config(str(mower_id)))
                started = time.monotonic()
                code, out = await _fuzz(url.rstrip("/"), running.token, config)
                found = _GENERATED.findall(out)
                count = int(found[-1]) if found else 0
                total += count
                phases = [
                    ln.strip() for ln in out.splitlines() if re.match(r"\s+\S+\s+Stateful", ln)
                ]
                seconds = time.monotonic() - started
                print(f"{name}: {count} generated cases in {seconds:.1f} s {phases}")
                if code != 0 or count == 0:
                    failures.append(f"--- {name}\n{out}")
        print(f"all services: {total} generated cases")
    assert not failures, "\n".join(failures)
