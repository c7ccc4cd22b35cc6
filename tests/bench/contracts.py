"""Encode+decode throughput of the v1 codecs against stdlib json with hand conversion.

Run: python -m tests.bench.contracts [--smoke]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from contracts.v1 import (
    CommandEnvelope,
    MowerState,
    Position,
    SetBladeHeight,
    decode_command,
    decode_state,
    encode,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ENVELOPE = CommandEnvelope.issue(
    mower_id=uuid.uuid4(),
    account_id=uuid.uuid4(),
    command=SetBladeHeight(height_mm=40),
    issued_by="user:alice",
    now=NOW,
    correlation_id=uuid.uuid4(),
)
STATE = MowerState(
    mower_id=uuid.uuid4(),
    account_id=uuid.uuid4(),
    observed_at=NOW,
    activity="mowing",
    battery=73,
    charging=False,
    rtk_fix="fixed",
    rtk_source="ntrip:base-1",
    connection="wifi",
    blade_height_mm=40,
    speed_mps=0.5,
    position=Position(lat=52.52, lon=13.405, heading_deg=90.0),
    raw={"fw": "1.2.3"},
)


def _ts(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _parse_ts(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError("naive timestamp")
    return value.astimezone(UTC)


def stdlib_envelope_roundtrip(env: CommandEnvelope) -> dict[str, Any]:
    """What a hand-written codec does: dicts, str() of UUIDs, isoformat, checks on the way back."""
    doc = {
        "command_id": str(env.command_id),
        "mower_id": str(env.mower_id),
        "account_id": str(env.account_id),
        "issued_by": env.issued_by,
        "issued_at": _ts(env.issued_at),
        "expires_at": _ts(env.expires_at),
        "command": {"kind": "set_blade_height", "height_mm": 40},
        "priority": env.priority,
        "correlation_id": str(env.correlation_id),
    }
    back = json.loads(json.dumps(doc))
    out = {
        "command_id": uuid.UUID(back["command_id"]),
        "mower_id": uuid.UUID(back["mower_id"]),
        "account_id": uuid.UUID(back["account_id"]),
        "issued_by": back["issued_by"],
        "issued_at": _parse_ts(back["issued_at"]),
        "expires_at": _parse_ts(back["expires_at"]),
        "command": dict(back["command"]),
        "priority": back["priority"],
        "correlation_id": uuid.UUID(back["correlation_id"]),
    }
    if out["expires_at"] <= out["issued_at"]:
        raise ValueError("expires_at")
    if not 20 <= out["command"]["height_mm"] <= 100:
        raise ValueError("height_mm")
    return out


def stdlib_state_roundtrip(state: MowerState) -> dict[str, Any]:
    """The same by hand for a MowerState."""
    pos = state.position
    assert pos is not None
    doc = {
        "mower_id": str(state.mower_id),
        "account_id": str(state.account_id),
        "observed_at": _ts(state.observed_at),
        "activity": state.activity,
        "battery": state.battery,
        "charging": state.charging,
        "rtk_fix": state.rtk_fix,
        "rtk_source": state.rtk_source,
        "connection": state.connection,
        "blade_height_mm": state.blade_height_mm,
        "speed_mps": state.speed_mps,
        "error_code": state.error_code,
        "position": {"lat": pos.lat, "lon": pos.lon, "heading_deg": pos.heading_deg},
        "raw": state.raw,
    }
    back = json.loads(json.dumps(doc))
    back["mower_id"] = uuid.UUID(back["mower_id"])
    back["account_id"] = uuid.UUID(back["account_id"])
    back["observed_at"] = _parse_ts(back["observed_at"])
    if not 0 <= back["battery"] <= 100:
        raise ValueError("battery")
    return dict(back)


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``fn`` over about ``seconds``."""
    n = 0
    batch = 500
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            fn()
        n += batch
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def main() -> None:
    """Measure and print the RESULT line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a short run for CI")
    args = parser.parse_args()
    seconds = 0.2 if args.smoke else 3.0
    assert decode_command(encode(ENVELOPE)) == ENVELOPE
    assert decode_state(encode(STATE)) == STATE
    results = {
        "envelope_roundtrips_per_s": rate(lambda: decode_command(encode(ENVELOPE)), seconds),
        "stdlib_envelope_roundtrips_per_s": rate(
            lambda: stdlib_envelope_roundtrip(ENVELOPE), seconds
        ),
        "state_roundtrips_per_s": rate(lambda: decode_state(encode(STATE)), seconds),
        "stdlib_state_roundtrips_per_s": rate(lambda: stdlib_state_roundtrip(STATE), seconds),
    }
    envelope_x = results["envelope_roundtrips_per_s"] / results["stdlib_envelope_roundtrips_per_s"]
    state_x = results["state_roundtrips_per_s"] / results["stdlib_state_roundtrips_per_s"]
    print(f"msgspec over stdlib: envelope x{envelope_x:.1f}, state x{state_x:.1f}")
    print("RESULT " + " ".join(f"{k}={v:.0f}" for k, v in results.items()))


if __name__ == "__main__":
    main()
