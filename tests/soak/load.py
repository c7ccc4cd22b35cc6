"""The soak's users: commands through Fleet's API, each mower about once per few minutes."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import aiohttp

__all__ = ["drive"]

# Weighted as people use mowers: mostly start and send home, some pauses and settings.
_KINDS: list[tuple[float, Any]] = [
    (0.35, lambda r: {"kind": "start_mow", "duration_min": r.randint(3, 15)}),
    (0.20, lambda _: {"kind": "return_to_dock"}),
    (0.10, lambda _: {"kind": "pause_mow"}),
    (0.10, lambda _: {"kind": "resume_mow"}),
    (0.15, lambda r: {"kind": "set_blade_height", "height_mm": r.randint(20, 100)}),
    (0.10, lambda r: {"kind": "set_speed", "speed_mps": round(r.uniform(0.2, 1.2), 2)}),
]


def _command(rng: random.Random) -> dict[str, Any]:
    weights = [w for w, _ in _KINDS]
    make = rng.choices([k for _, k in _KINDS], weights)[0]
    body: dict[str, Any] = make(rng)
    return body


async def drive(
    fleet_url: str, token: str, mowers: list[str], *, rate: float, seconds: float, seed: int
) -> Counter[str]:
    """Issue ``rate`` commands a second for ``seconds``, open loop; count the answers."""
    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    latencies: list[float] = []
    gate = asyncio.Semaphore(64)
    pending: set[asyncio.Task[None]] = set()
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:

        async def one(mower: str, body: dict[str, Any]) -> None:
            url = f"{fleet_url}/v1/mowers/{mower}/commands"
            try:
                async with gate:
                    sent = time.monotonic()
                    async with http.post(url, json={"command": body, "ttl_s": 60}) as resp:
                        await resp.read()
                        counts[f"http_{resp.status}"] += 1
                    latencies.append(time.monotonic() - sent)
            except (aiohttp.ClientError, TimeoutError):
                counts["errors"] += 1

        start = time.monotonic()
        issued = 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = int(elapsed * rate) - issued
            for _ in range(max(0, due)):
                task = asyncio.create_task(one(rng.choice(mowers), _command(rng)))
                pending.add(task)
                task.add_done_callback(pending.discard)
                issued += 1
            await asyncio.sleep(0.05)
        if pending:
            await asyncio.wait(pending, timeout=10.0)
        # What Fleet has not answered by now is counted, not left to fail on a closed session.
        for task in list(pending):
            task.cancel()
            counts["unanswered"] += 1
        await asyncio.gather(*pending, return_exceptions=True)
    counts["issued"] = issued
    if latencies:
        ordered = sorted(latencies)
        counts["answer_p50_ms"] = round(1000 * ordered[len(ordered) // 2])
        counts["answer_p99_ms"] = round(1000 * ordered[int(len(ordered) * 0.99)])
    return counts
