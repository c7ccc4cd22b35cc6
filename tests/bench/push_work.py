"""The Web Push benchmarks' work: the local push service in its own process, deliveries.

Imports nothing of the channels but ``Delivery``, so ``push_channel_cpu`` can measure an
older version of the code with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

from mowdeck.notifications.delivery.channels import Delivery

__all__ = ["deliveries", "start_receiver"]

KINDS = [("mowing_finished", "info"), ("battery_low", "warning"), ("mower_stuck", "critical")]


def start_receiver(subscriptions: int, sample_every: int) -> tuple[subprocess.Popen[str], Any]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.webpush_receiver",
            "--subscriptions",
            str(subscriptions),
            "--sample-every",
            str(sample_every),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def deliveries(subs: list[dict[str, Any]], count: int) -> list[Delivery]:
    now = datetime.now(UTC)
    out = []
    for i in range(count):
        kind, severity = KINDS[i % len(KINDS)]
        out.append(
            Delivery(
                delivery_id=f"d-{i}",
                user_id=f"u-{i % 97}",
                channel="webpush",
                target={"channel": "webpush", "subscription": subs[i % len(subs)]},
                kind=kind,
                mower_id=f"m-{i % 500}",
                severity=severity,  # type: ignore[arg-type]
                title="Mower 12: battery low",
                body="Battery at 18 %, the mower returns to its station.",
                occurred_at=now,
                dedupe_key=f"{kind}:m-{i % 500}:{i}",
                console_url="https://console.mowdeck.example/mowers/m-12",
            )
        )
    return out
