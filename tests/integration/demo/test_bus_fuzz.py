"""Hypothesis-drawn junk on every subject a service consumes, against the running system.

The whole demo runs (every service, simulated mowers) on the test's NATS server and
PostgreSQL. For each subject family a batch of payloads that the v1 decoder refuses
(noise, wrong JSON, near misses of a valid message, deep nesting, unicode edge cases,
odd headers) is published where a service consumes it. After each batch:

- every durable consumer of those subjects has settled every message of the batch (its
  ack floor is past the last one: terminated, not left for redelivery) and logged a
  ``terminated`` line with a reason for each; on a request subject each got an error reply;
- a valid message of the family is still handled (the sentinel: a command executed, a
  state in the read model, a list answered...);
- no service logged a failure it did not mean (``handler failed``, an exception).

At the end, what was accepted before the fuzzing is still there: every mower in Fleet,
the gateway and Telemetry, and the command issued first with its final status.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from hypothesis import strategies as st

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    EventEnvelope,
    MowerListReply,
    MowerListRequest,
    MowerState,
    SetBladeHeight,
    decode,
    decode_result,
    encode,
)
from contracts.v1.subjects import FLEET_MOWERS_LIST, PRIORITY_HEADER
from mowdeck import demo
from mowdeck.kit.bus import Bus
from tests.integration.demo.bus_families import (
    FAILURES,
    FAMILIES,
    HEIGHT,
    TERMINATED,
    Family,
    System,
    refused_by,
)
from tests.support.eventually import eventually
from tests.support.fuzzing import draw, examples, junk, unicode_edges
from tests.support.natsserver import NatsServer

_HEADERS = st.one_of(
    st.none(),
    st.fixed_dictionaries({PRIORITY_HEADER: st.sampled_from(["emergency", "normal", "EMERGENCY"])}),
    st.fixed_dictionaries({PRIORITY_HEADER: unicode_edges.filter(lambda s: "\\" not in s)}),
)


def _batch(family: Family, seed: int) -> list[tuple[bytes, dict[str, str] | None]]:
    payloads = junk(family.valid).filter(refused_by(family.decoder))
    drawn = draw(st.tuples(payloads, _HEADERS), examples(25), at=seed)
    # Headers NATS can carry: no line breaks or NULs, which the client would refuse.
    return [(p, h if h and all(v.isprintable() for v in h.values()) else None) for p, h in drawn]


def _consumers_of(infos: list[Any], subjects: list[str]) -> list[Any]:
    def covers(pattern: str, subject: str) -> bool:
        p, s = pattern.split("."), subject.split(".")
        for i, token in enumerate(p):
            if token == ">":
                return len(s) > i
            if i >= len(s) or (token != "*" and token != s[i]):
                return False
        return len(p) == len(s)

    found = []
    for info in infos:
        filters = info.config.filter_subjects or [info.config.filter_subject or ">"]
        if info.config.durable_name and any(covers(f, s) for f in filters for s in subjects):
            found.append(info)
    return found


async def _settled(bus: Bus, stream: str, subjects: list[str], last_seq: int) -> list[str]:
    """The durables of ``subjects`` in ``stream``, once each has settled up to ``last_seq``."""
    infos = await bus.js.consumers_info(stream)
    names = [i.name for i in _consumers_of(infos, subjects)]

    async def all_past() -> bool:
        for name in names:
            info = await bus.js.consumer_info(stream, name)
            if info.ack_floor.stream_seq < last_seq and info.num_ack_pending:
                return False
        return True

    await eventually(all_past, 30, interval=0.1, what=f"{names} past sequence {last_seq}")
    return names


async def _fuzz_family(system: System, family: Family, seed: int) -> str:
    subjects = family.subjects(system)
    batch = _batch(family, seed)
    assert len(batch) >= 5, family.name
    first_log = len(system.logs)
    received = system.realtime_received(family.stream) if family.stream else 0.0
    ignored = system.lane_ignored()
    last_seq = 0
    for i, (payload, headers) in enumerate(batch):
        subject = subjects[i % len(subjects)]
        if family.stream is not None:
            ack = await system.bus.js.publish(subject, payload, headers=headers)
            last_seq = ack.seq
        elif family.name == "fleet.mowers.list":
            msg = await system.bus.nc.request(subject, payload, timeout=5, headers=headers)
            assert msg.headers and msg.headers.get("Nats-Service-Error-Code") == "400", msg
        else:
            stop = {**(headers or {}), PRIORITY_HEADER: "emergency"}
            await system.bus.nc.publish(subject, payload, headers=stop)
    durables: list[str] = []
    if family.stream is not None:
        durables = await _settled(system.bus, family.stream, subjects, last_seq)
        assert bool(durables) == family.durables, (family.name, durables)
        # Realtime follows every stream live, with no durable: it read the batch too.
        await eventually(
            lambda: system.realtime_received(family.stream) >= received + len(batch),
            10,
            what=f"Realtime past the batch on {family.name}",
        )
    await family.sentinel(system)
    if family.name == "emergency.mower.*":
        # Core messages, nothing to terminate: the lane counts what it did not act on.
        assert system.lane_ignored() - ignored >= len(batch), family.name
    seen = system.logs[first_log:]
    failures = [e for e in seen if e["event"] in FAILURES or e.get("log_level") == "error"]
    assert not failures, (family.name, failures[:3])
    if durables:
        terms = [e for e in seen if e["event"] in TERMINATED and e.get("subject") in subjects]
        assert all(e.get("reason") for e in terms), terms[:3]
        assert len(terms) >= len(batch), (family.name, len(terms), len(batch), durables)
    return f"{family.name}: {len(batch)} messages, consumers {durables}"


async def _near_misses(system: System, first: dict[str, Any]) -> str:
    """Messages that decode but name another mower or event than their subject.

    Bus permissions are granted by subject (the gateway may publish ``mower.connected``,
    not ``mower.removed``), so a consumer must hold a message to its subject.
    """
    running, bus = system.running, system.bus
    a, b = running.mowers[0], running.mowers[1]
    listed = decode(
        await bus.request(FLEET_MOWERS_LIST, MowerListRequest(), timeout=5), MowerListReply
    )
    reg_a = next(m for m in listed.mowers if m.mower_id == a)
    first_id = uuid.UUID(first["command_id"])
    forged_command = CommandEnvelope.issue(
        mower_id=b,
        account_id=reg_a.account_id,
        command=SetBladeHeight(height_mm=99),
        issued_by="user:fuzz",
        now=datetime.now(UTC),
        ttl=timedelta(seconds=60),
    )
    results: list[CommandResult] = []

    async def on_result(msg: Any) -> None:
        results.append(decode_result(msg.data))

    sub = await bus.nc.subscribe("command.result.mower.*", cb=on_result)
    removal = EventEnvelope.new("mower.removed", reg_a, producer="fuzz", now=datetime.now(UTC))
    state = MowerState(
        mower_id=b,
        account_id=reg_a.account_id,
        observed_at=datetime.now(UTC),
        activity="error",
        battery=1,
        error_code="forged",
    )
    result = CommandResult(
        command_id=first_id, mower_id=b, status="failed", at=datetime.now(UTC), reason="forged"
    )
    first_log = len(system.logs)
    sent = [
        ("event.mower.registered", encode(removal)),
        ("event.mower.connected", encode(removal)),
        (f"command.mower.{a}", encode(forged_command)),
        (f"telemetry.mower.{a}", encode(state)),
        (f"command.result.mower.{a}", encode(result)),
    ]
    for subject, data in sent:
        ack = await bus.js.publish(subject, data)
        stream = "EVENTS" if subject.startswith("event.") else subject.split(".")[0].upper()
        stream = "COMMANDS" if stream == "COMMAND" else stream
        await _settled(bus, stream, [subject], ack.seq)
    # Sentinels: each mower is still commanded, read and listed as before.
    for mower in (a, b):
        answer = await system.command(mower, HEIGHT)
        assert answer["status"] in {"executed", "failed", "rejected"}, answer
    await sub.unsubscribe()
    assert not [r for r in results if r.command_id == forged_command.command_id]
    assert a in system.gateway.mowers
    status, _ = await system.get(f"{running.telemetry_url}/v1/mowers/{a}/state")
    assert status == 200, "Telemetry purged a mower on another event's subject"
    status, state_b = await system.get(f"{running.telemetry_url}/v1/mowers/{b}/state")
    assert status == 200 and state_b.get("error_code") != "forged", state_b
    fleet_a = first.get("mower_id") or (running.example or running.mowers[-1])
    status, kept = await system.get(f"{running.fleet_url}/v1/mowers/{fleet_a}/commands/{first_id}")
    assert status == 200, kept
    assert [x["status"] for x in kept["statuses"]][-1] == first["status"], kept
    assert not [x for x in kept["statuses"] if x.get("reason") == "forged"], kept
    terms = [e for e in system.logs[first_log:] if e["event"] in TERMINATED]
    subjects = {e.get("subject") for e in terms}
    assert subjects >= {s for s, _ in sent}, subjects
    return f"near misses: {len(sent)} messages, {len(terms)} terminations"


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    with structlog.testing.capture_logs() as captured:
        yield captured


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    state = Path(tempfile.gettempdir(), "demo-state-of-the-tests")
    return parser.parse_args(["--port", "0", "--mowers", "5", "--state-dir", str(state)])


@pytest.mark.timeout(300)
async def test_every_consumed_subject_refuses_junk_and_keeps_serving(
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    bus: Bus,
    nats_server: NatsServer,
    logs: list[dict[str, Any]],
) -> None:
    monkeypatch.setenv("MOWDECK_NATS_URL", nats_server.url)
    monkeypatch.setenv("MOWDECK_DATABASE_URL", database_url)
    started = time.monotonic()
    async with (
        demo.running_demo(_args()) as running,
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {running.token}"}) as http,
    ):
        system = System(running, bus, http, logs)
        first = await system.command(running.example or running.mowers[-1], HEIGHT)
        report = [
            await _fuzz_family(system, family, seed) for seed, family in enumerate(FAMILIES, 29)
        ]
        report.append(await _near_misses(system, first))
        # Nothing accepted before is lost.
        status, listed = await system.get(f"{running.fleet_url}/v1/mowers?limit=100")
        assert status == 200
        assert {uuid.UUID(m["mower_id"]) for m in listed["mowers"]} == set(running.mowers)
        assert set(system.gateway.mowers) >= set(running.mowers)
        for mower in running.mowers:
            status, _ = await system.get(f"{running.telemetry_url}/v1/mowers/{mower}/state")
            assert status == 200, mower
        status, audit = await system.get(f"{running.fleet_url}/v1/audit?limit=500")
        assert status == 200
        assert first["command_id"] in str(audit)
    print("\n".join(report), f"\nall families in {time.monotonic() - started:.1f} s")
