"""What Schemathesis does not send: bodies past the size limit, wrong content types,
unicode edge cases, oversized and odd headers, broken query strings.

``test_openapi_fuzz.py`` sends what the documents describe, valid or not. This sends, to
every operation of every service's document (the streams left out, as there), requests no
schema describes: each must be answered with a 4xx ``application/problem+json`` (never a
5xx, never a dropped connection), and the service must answer a valid request after each
operation's batch.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import strategies as st

from mowdeck import demo
from mowdeck.kit.bus import Bus
from tests.support.fuzzing import draw, examples
from tests.support.natsserver import NatsServer

PROBLEM = "application/problem+json"
_STREAMS = {"/v1/stream", "/v1/ws", "/mowers/{mower_id}/ws"}
# Strings that decoders, databases and log lines disagree about, as JSON text.
_EDGES = [
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\u0000"',
    '"a\\u0000b"',
    '"\u202e\u200b\ufeff"',
    '"' + "\U0001f9a0" * 300 + '"',
    '"' + "e\u0301" * 300 + '"',
]


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")
    return parser.parse_args(["--port", "0", "--mowers", "2", "--state-dir", str(state)])


def _bodies(document: dict[str, Any], seed: int) -> list[tuple[str, bytes]]:
    """(content type, body) pairs no operation accepts."""
    texts = draw(st.text(min_size=1, max_size=40), examples(5), at=seed)
    out: list[tuple[str, bytes]] = [
        ("text/plain", b'{"name": "x"}'),
        ("application/xml", b"<mower/>"),
        ("multipart/form-data; boundary=x", b"--x\r\n\r\nname\r\n--x--"),
        ("application/json", b'{"name": '),
        ("application/json", b"\xef\xbb\xbf{}"),
        ("application/json", b"\xff\xfe{}"),
        ("application/json", b"[" * 5000 + b"]" * 5000),
        # Past the 1 MiB every service reads at most.
        ("application/json", b'{"name": "' + b"x" * (2 << 20) + b'"}'),
    ]
    for edge in _EDGES:
        out.append(("application/json", f'{{"name": {edge}, "kind": {edge}}}'.encode()))
    for text in texts:
        out.append(("application/json", json.dumps({text: text, "command": text}).encode()))
    del document
    return out


def _headers(token: str) -> list[dict[str, str]]:
    return [
        {"Authorization": "Bearer " + "a" * 7000},
        {"Authorization": "Bearer " + token + "\u00e9".encode().decode("latin-1")},
        {"Authorization": "Basic Zm9vOmJhcg=="},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {token}", "Content-Length": "5", "X-Pad": "x" * 6000},
        {"Authorization": f"Bearer {token}", "Accept": "application/xml"},
        {"Authorization": f"Bearer {token}", **{f"X-H{i}": "v" for i in range(120)}},
    ]


_QUERIES = [
    "?limit=%00",
    "?limit=-1&limit=2",
    "?cursor=%ED%A0%80",
    "?from=2026-13-45T99:99:99Z",
    "?" + "a=b&" * 2000,
    "?%zz=1",
]


async def _answer(
    http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any
) -> tuple[int, str]:
    data = kwargs.pop("data", None)
    if data is not None:
        kwargs["data"] = io.BytesIO(data)  # a large body from a stream, as aiohttp asks
    try:
        async with http.request(method, url, **kwargs) as r:
            await r.read()
            return r.status, r.headers.get("Content-Type", "")
    except aiohttp.ClientResponseError as err:  # the parser refused and closed: its code
        return err.status, PROBLEM


def _path(template: str, mower: uuid.UUID) -> str:
    path = template.replace("{mower_id}", str(mower))
    while "{" in path:
        start, end = path.index("{"), path.index("}")
        path = path[:start] + str(uuid.uuid4()) + path[end + 1 :]
    return path


@pytest.mark.timeout(300)
async def test_requests_no_schema_describes_get_a_problem_and_the_service_goes_on(
    monkeypatch: pytest.MonkeyPatch, database_url: str, bus: Bus, nats_server: NatsServer
) -> None:
    monkeypatch.setenv("MOWDECK_NATS_URL", nats_server.url)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    failures: list[str] = []
    statuses: collections.Counter[int] = collections.Counter()
    sent = 0
    async with demo.running_demo(_args()) as running:
        token = running.token
        auth = {"Authorization": f"Bearer {token}"}
        services = {
            "fleet": running.fleet_url,
            "telemetry": running.telemetry_url,
            "notifications": running.notifications_url,
            "realtime": running.realtime_url,
            "simulator": running.sim_url,
        }
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            for seed, (name, service_url) in enumerate(services.items()):
                base = service_url.rstrip("/")
                async with http.get(f"{base}/openapi.json") as r:
                    document = await r.json()
                mower = running.mowers[0]
                for template, item in document["paths"].items():
                    if template in _STREAMS:
                        continue
                    url = base + _path(template, mower)
                    for method, operation in item.items():
                        if method not in {"get", "post", "put", "patch", "delete"}:
                            continue
                        tries: list[dict[str, Any]] = []
                        if "requestBody" in operation:
                            tries += [
                                {"data": body, "headers": {**auth, "Content-Type": ctype}}
                                for ctype, body in _bodies(document, seed)
                            ]
                        if method == "get":
                            tries += [{"headers": h} for h in _headers(token)]
                            tries += [{"headers": auth, "query": q} for q in _QUERIES]
                        for kwargs in tries:
                            target = url + kwargs.pop("query", "")
                            status, ctype = await _answer(
                                http, method.upper(), target, allow_redirects=False, **kwargs
                            )
                            sent += 1
                            statuses[status] += 1
                            if status >= 500 or (status >= 400 and not ctype.startswith(PROBLEM)):
                                shown = {k: str(v)[:80] for k, v in kwargs.items()}
                                failures.append(
                                    f"{name} {method.upper()} {template}: {status} {ctype} {shown}"
                                )
                        # The service goes on: a valid request right after the batch.
                        async with http.get(f"{base}/openapi.json") as r:
                            assert r.status == 200, (name, template, method)
            # Valid bodies but for one string: each is stored as sent or refused naming it.
            fleet = running.fleet_url
            for edge in _EDGES:
                name = json.loads(edge)
                url = f"{fleet}/v1/mowers/{running.mowers[1]}"
                patch = {"name": name}
                status, ctype = await _answer(http, "PATCH", url, json=patch, headers=auth)
                statuses[status] += 1
                if status >= 500 or (status >= 400 and not ctype.startswith(PROBLEM)):
                    failures.append(f"fleet PATCH name {edge[:20]}: {status} {ctype}")
                elif status == 200:
                    async with http.get(url, headers=auth) as r:
                        assert (await r.json())["name"] == name, edge[:20]
                body = {"command": {"kind": "emergency_stop", "reason": name}}
                url = f"{fleet}/v1/mowers/{running.mowers[1]}/commands"
                status, ctype = await _answer(http, "POST", url, json=body, headers=auth)
                statuses[status] += 1
                if status >= 500 or (status >= 400 and not ctype.startswith(PROBLEM)):
                    failures.append(f"fleet POST stop reason {edge[:20]}: {status} {ctype}")
            async with http.get(f"{running.fleet_url}/v1/mowers", headers=auth) as r:
                assert r.status == 200
    print(f"{sent} requests, {len(failures)} failures, statuses {sorted(statuses.items())}")
    assert not failures, "\n".join(failures[:40])
    # Each kind of refusal was reached: too large, wrong type, malformed, unauthenticated.
    assert {400, 401, 413, 415} <= set(statuses), statuses
