"""``mowdeck demo``: one service's slow queries never starve another of connections."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from mowdeck import demo
from tests.support.eventually import eventually

TELEMETRY_POOL = 8  # MOWDECK_TELEMETRY_DB_POOL_SIZE's default


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")  # outside the checkout
    return parser.parse_args(["--port", "0", "--mowers", "2", "--state-dir", str(state)])


async def _waiting(database_url: str) -> int:
    # Telemetry's connections waiting for the lock: the viewers' queries and its ingest.
    # Asked on a connection of its own: inside the locker's transaction, pg_stat_activity
    # would answer from the snapshot its first read took.
    conn = await asyncpg.connect(database_url)
    try:
        found: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
            " AND wait_event_type = 'Lock' AND query LIKE '%mower_history%'"
        )
    finally:
        await conn.close()
    return found


@pytest.mark.slow
async def test_telemetry_queries_holding_every_connection_leave_the_emergency_stop_alone(
    monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    monkeypatch.delenv("MOWDECK_NATS_URL", raising=False)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    # Queries that hold their connections for as long as the test needs them to.
    monkeypatch.setenv("MOWDECK_DATABASE_STATEMENT_TIMEOUT_MS", "120000")
    async with demo.running_demo(_args()) as running:
        headers = {"Authorization": f"Bearer {running.token}"}
        mower = running.mowers[0]
        locker = await asyncpg.connect(database_url)
        try:
            locked = locker.transaction()
            await locked.start()
            await locker.execute("LOCK TABLE mower_history IN ACCESS EXCLUSIVE MODE")
            async with aiohttp.ClientSession(headers=headers) as http:
                history = f"{running.telemetry_url}/v1/mowers/{mower}/history?step=1m"
                # More than Telemetry's pool and than the one pool the services shared.
                viewers = [asyncio.create_task(_get(http, history)) for _ in range(12)]
                await eventually(
                    lambda: _full(database_url), timeout=30, what="telemetry's pool held by viewers"
                )
                stop = f"{running.fleet_url}/v1/mowers/{mower}/commands?wait=20"
                command = {"command": {"kind": "emergency_stop", "reason": "starvation test"}}
                async with http.post(stop, json=command, timeout=aiohttp.ClientTimeout(30)) as r:
                    body = await r.json()
                assert (r.status, body["status"]) == (200, "executed"), body
                async with http.get(f"{running.fleet_url}/v1/mowers") as r:
                    assert r.status == 200
                for viewer in viewers:
                    viewer.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await viewer
            await locked.rollback()
        finally:
            await locker.close()


async def _get(http: aiohttp.ClientSession, url: str) -> int:
    async with http.get(url) as r:
        return r.status


async def _full(database_url: str) -> bool:
    return await _waiting(database_url) >= TELEMETRY_POOL
