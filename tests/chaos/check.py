"""The invariant checker: what the driver was told against what the system kept and sent.

It reads Fleet's audit trail (``/v1/audit/export``), what each simulated device was sent
(``/sim/mowers/{id}/frames``: every command frame, repeats included), Telemetry's history
and Notifications' inboxes and deliveries (PostgreSQL), and the COMMANDS and TELEMETRY
streams; the Realtime clients' events come from the run.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import asyncpg
import nats

from mowdeck.kit.bus_permissions import inbox_prefix
from tests.chaos.driver import Driver, Issued
from tests.chaos.faults import Fault
from tests.chaos.sse import SseClient

FINAL = {"executed", "failed", "expired", "rejected"}
SIGNIFICANT = (
    "activity",
    "battery",
    "charging",
    "rtk_fix",
    "rtk_source",
    "connection",
    "blade_height_mm",
    "speed_mps",
    "error_code",
)


@dataclass
class Findings:
    """Every count the RESULT line prints, and the listed cases behind the non-zero ones."""

    counts: dict[str, Any] = field(default_factory=dict)
    listed: list[str] = field(default_factory=list)
    allowed: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def case(self, key: str, text: str) -> None:
        self.add(key)
        self.listed.append(f"{key}: {text}")


def nearest(faults: list[Fault], t: float) -> str:
    """The fault nearest to run time ``t`` (before or after), as text."""
    if not faults:
        return "no fault"
    f = min(faults, key=lambda f: abs(f.t - t))
    return f"{f.kind}({f.target}) at {f.t:.1f}s, healed {f.healed_t:.1f}s"


async def audit(fleet: str, token: str, since: datetime) -> dict[str, dict[str, Any]]:
    """Fleet's audit trail since ``since``, by command id."""
    out: dict[str, dict[str, Any]] = {}
    headers = {"Authorization": f"Bearer {token}"}
    params = {"from": since.isoformat().replace("+00:00", "Z")}
    timeout = aiohttp.ClientTimeout(total=120)
    url = f"{fleet}/v1/audit/export"
    async with (
        aiohttp.ClientSession(timeout=timeout) as s,
        s.get(url, params=params, headers=headers) as r,
    ):
        r.raise_for_status()
        async for raw in r.content:
            if raw.strip():
                doc = json.loads(raw)
                out[doc["command_id"]] = doc
    return out


async def frames(sim: str, mowers: list[str]) -> dict[str, int]:
    """Command frames each device was sent, by command id (repeats counted)."""
    out: dict[str, int] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        for m in mowers:
            async with s.get(f"{sim}/sim/mowers/{m}/frames") as r:
                doc = await r.json()
                out.update({c: int(n) for c, n in doc.get("frames", {}).items()})
    return out


async def read_stream(urls: list[str], user: str, password: str, subject: str) -> list[Any]:
    """Every message of ``subject`` the streams hold: (sequence, subject, decoded data)."""
    nc = await nats.connect(
        urls, user=user, password=password, connect_timeout=5, inbox_prefix=inbox_prefix(user)
    )
    out: list[Any] = []
    try:
        js = nc.jetstream(timeout=10)
        stream = "TELEMETRY" if subject.startswith("telemetry") else "COMMANDS"
        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True)
        while True:
            try:
                msg = await sub.next_msg(timeout=3)
            except TimeoutError:
                break
            out.append((msg.metadata.sequence.stream, msg.subject, json.loads(msg.data)))
            if msg.metadata.num_pending == 0:
                break
        await sub.unsubscribe()
    finally:
        await nc.close()
    return out


def check_commands(
    f: Findings,
    driver: Driver,
    trail: dict[str, dict[str, Any]],
    sent: dict[str, int],
    faults: list[Fault],
) -> None:
    """Issued, accepted, one final status, lost, doubled; e-stops delivered or finalized."""
    f.add("commands", len(driver.issued))
    accepted = [r for r in driver.issued if r.accepted]
    f.add("accepted", len(accepted))
    known = {r.command_id for r in accepted}
    unanswered = [c for c in trail if c not in known]
    f.add("accepted_unanswered", len(unanswered))  # stored, the caller's answer lost
    f.add("rejected_at_api", sum(1 for r in driver.issued if r.http is not None and r.http >= 400))
    f.add("http_errors", sum(1 for r in driver.issued if r.http is None))
    for r in driver.issued:
        if r.http is not None and r.http >= 400:
            f.add(f"http_{r.http}_{r.status or ''}".replace(" ", "_")[:48])
    f.counts.setdefault("lost", 0)
    f.counts.setdefault("doubled", 0)
    f.counts.setdefault("estops_lost", 0)
    for rec in accepted:
        _one(f, rec, trail.get(str(rec.command_id)), sent, faults)
    for cid in unanswered:
        statuses = [s for s in trail[cid]["statuses"] if s["status"] in FINAL]
        finals = {s["status"] for s in statuses}
        said = {s["status"] for s in statuses if s.get("source") != "fleet"}
        if not finals:
            f.case("lost", f"{cid} (answer lost to the caller)")
        elif len(said) > 1:
            f.case("doubled", f"{cid} (answer lost to the caller) {sorted(finals)}")
        elif len(finals) > 1:  # Fleet's "outcome unknown", then the gateway's answer
            f.add("late_results")
            f.allowed["late result after Fleet's outcome unknown"] += 1
    f.add("sent_twice", sum(1 for n in sent.values() if n > 1))


def _one(
    f: Findings, rec: Issued, doc: dict[str, Any] | None, sent: dict[str, int], faults: list[Fault]
) -> None:
    cid = str(rec.command_id)
    statuses = [] if doc is None else [s for s in doc["statuses"] if s["status"] in FINAL]
    finals = {s["status"] for s in statuses}
    where = f"{cid} {rec.kind} mower {rec.mower} at {rec.t:.1f}s; nearest {nearest(faults, rec.t)}"
    said = sorted({s["status"] for s in statuses if s.get("source") != "fleet"})
    text = "; ".join(f"{s['status']} by {s.get('source')}: {s.get('reason')}" for s in statuses)
    if len(finals) == 1:
        f.add("one_final")
    elif not finals:
        f.case("lost", where + (" (not in the audit trail)" if doc is None else ""))
    elif len(said) > 1:
        f.case("doubled", f"{where}: {text}")
    else:
        # Fleet gave up (outcome unknown) and the device's answer came later: both kept,
        # the trail says who said what (docs/reliability.md, "Late results").
        f.add("late_results")
        f.allowed["late result after Fleet's outcome unknown"] += 1
    if rec.kind == "emergency_stop":
        f.add("estops")
        delivered = sent.get(cid, 0) > 0
        if not finals:
            f.case("estops_lost", where)
        elif not delivered:
            reason = statuses[0].get("reason") or statuses[0]["status"]
            f.add("estops_finalized_undelivered")
            f.listed.append(f"estop finalized, not delivered: {where}: {reason}")


def check_states(
    f: Findings, messages: list[Any], history: dict[str, list[tuple[datetime, tuple[Any, ...]]]]
) -> None:
    """Significant changes (ADR 0017) the stream acknowledged and the history lacks.

    A change is found at its own time, or later: a state redelivered to another replica
    after a newer one of its mower was stored is older than the latest row and is not
    written; the change then appears with the next state that carries it ("recorded
    late", allowed by design). Lost: its values never reach the history before the next
    change."""
    by_mower: dict[str, dict[datetime, tuple[Any, ...]]] = defaultdict(dict)
    for _, _, doc in messages:
        by_mower[str(doc["mower_id"])][_ts(doc["observed_at"])] = _fp(doc)
    f.counts.setdefault("states_lost", 0)
    for mower, states in by_mower.items():
        times = sorted(states)
        changes = [t for a, t in itertools.pairwise(times) if states[a] != states[t]]
        rows = history.get(mower, [])
        stored = {at for at, _ in rows}
        for n, at in enumerate(changes):
            f.add("significant_changes")
            if at in stored:
                continue
            until = (
                changes[n + 1] if n + 1 < len(changes) else datetime.max.replace(tzinfo=at.tzinfo)
            )
            if any(at < t < until and fp == states[at] for t, fp in rows):
                f.add("states_recorded_late")
                f.allowed["significant change recorded with a later state"] += 1
            else:
                f.case("states_lost", f"mower {mower} observed {at.isoformat()}")


def _fp(doc: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        round(float(v), 6) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        for v in (doc.get(k) for k in SIGNIFICANT)
    )


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def read_models(
    database: str, since: datetime
) -> tuple[dict[str, list[tuple[datetime, tuple[Any, ...]]]], list[Any], list[Any]]:
    """Telemetry's history keys, Notifications' inbox items and deliveries since ``since``."""
    conn = await asyncpg.connect(database)
    try:
        rows = await conn.fetch(
            f"SELECT mower_id, observed_at, {', '.join(SIGNIFICANT)} FROM mower_history"  # noqa: S608 - constant names
            " ORDER BY mower_id, observed_at"
        )
        history: dict[str, list[tuple[datetime, tuple[Any, ...]]]] = defaultdict(list)
        for r in rows:
            history[str(r["mower_id"])].append((r["observed_at"], _fp(dict(r))))
        inbox = await conn.fetch(
            "SELECT user_id, mower_id::text AS mower_id, kind, dedupe_key, occurred_at, created_at"
            " FROM notification_inbox WHERE created_at >= $1",
            since - timedelta(minutes=1),
        )
        deliveries = await conn.fetch(
            "SELECT user_id, dedupe_key, state, attempts FROM notification_deliveries"
            " WHERE created_at >= $1",
            since - timedelta(minutes=1),
        )
    finally:
        await conn.close()
    return history, list(inbox), list(deliveries)


def check_notifications(
    f: Findings, driver: Driver, user: str, inbox: list[Any], deliveries: list[Any]
) -> None:
    """Each induced rule: one inbox item for the subscriber, one delivery of it."""
    f.counts.setdefault("missing_notifications", 0)
    f.counts.setdefault("duplicate_notifications", 0)
    delivered: dict[tuple[str, str], int] = defaultdict(int)
    for d in deliveries:
        if d["state"] == "sent":
            delivered[(d["user_id"], d["dedupe_key"])] += 1
    for n, ind in enumerate(driver.induced):
        if ind.expects is None:
            continue
        f.add("rules_fired")
        later = [x.wall for x in driver.induced[n + 1 :] if x.mower == ind.mower]
        until = min(later, default=datetime.max.replace(tzinfo=ind.wall.tzinfo))
        items = [
            i
            for i in inbox
            if i["user_id"] == user
            and i["mower_id"] == ind.mower
            and i["kind"] == ind.expects
            and ind.wall - timedelta(seconds=5) <= i["occurred_at"] < until
        ]
        where = f"{ind.expects} mower {ind.mower} induced at {ind.t:.1f}s"
        if not items:
            f.case("missing_notifications", where)
        # A duplicate is a second item or a second delivery of one occurrence (its
        # dedupe key). Another occurrence while the fault lasts (the mower seen stuck
        # again after it was offline, past the kind's cooldown) is a new notification.
        keys = Counter(i["dedupe_key"] for i in items)
        for key, count in keys.items():
            sends = delivered.get((user, key), 0)
            if count > 1 or sends > 1:
                f.case("duplicate_notifications", f"{where}: {key} x{count}, sent {sends}")
            elif not sends:
                f.case("undelivered_notifications", f"{where}: {key}")
        if len(keys) > 1:
            f.add("repeat_occurrences", len(keys) - 1)
            f.allowed["another occurrence of a lasting fault"] += len(keys) - 1


def check_realtime(f: Findings, clients: list[SseClient], results: list[Any]) -> None:
    """Command results a client's stream covered and never showed, without a resync."""
    f.counts.setdefault("realtime_gaps", 0)
    for n, client in enumerate(clients):
        positions = client.commands_seq()
        if not positions:
            f.case("realtime_gaps", f"client {n} received nothing")
            continue
        start, end = positions[0][0], max(p for p, _ in positions)
        excused: list[tuple[int, int]] = []
        last = start
        for pos, kind in positions:
            if kind in ("resync", "snapshot") and pos != start:
                excused.append((last, pos))
            last = pos
        got = client.results()
        mine = set(client.mowers)
        for seq, _, doc in results:
            if not (start < seq <= end) or str(doc.get("mower_id")) not in mine:
                continue
            if (str(doc["command_id"]), doc["status"]) in got:
                continue
            if any(a < seq <= b for a, b in excused):
                f.add("realtime_resynced")
                continue
            f.case(
                "realtime_gaps", f"client {n} missed {doc['command_id']} {doc['status']} (c{seq})"
            )
        f.add("realtime_events", len(got))
        f.add("realtime_resyncs", sum(1 for _, k, _, _ in client.events if k == "resync"))
        for _, kind, _, doc in client.events:
            if kind == "close" and isinstance(doc, dict):
                f.add(f"realtime_closed_{doc.get('reason', '?')}".replace(" ", "_")[:40])
        f.add("realtime_reconnects", client.reconnects)
