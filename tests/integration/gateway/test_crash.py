"""A shard killed with SIGKILL under load: after its restart nothing accepted is lost.

Deliveries are acknowledged once their command's final result is stored, so whatever the
killed process held comes back to its successor. Each command ends with exactly one
final status, and no mower carries out a command twice; what each mower was *sent* is
counted too (repeats included), not only what it executed after its own de-duplication.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from contracts.v1 import CommandEnvelope, CommandResult, CommandStatus, SetSpeed, encode
from contracts.v1.subjects import MSG_ID_HEADER, result_subject
from mowdeck.kit.bus import Bus
from simulator import LatencyFault, SimulatorServer
from tests.integration.gateway.conftest import ResultLog, command
from tests.integration.gateway.processes import metric, ready, spawn_gateway
from tests.support.eventually import eventually
from tests.support.natsserver import NatsServer, free_port

ACK_WAIT = "2"  # redeliveries to the restarted shard come this soon after its start


def final_statuses(results: ResultLog) -> dict[uuid.UUID, set[str]]:
    """Every distinct final status stored per command."""
    finals: dict[uuid.UUID, set[str]] = defaultdict(set)
    for r in results.results:
        if r.is_final:
            finals[r.command_id].add(r.status)
    return finals


def sent_and_executed(sim: SimulatorServer, mowers: list[uuid.UUID]) -> tuple[Counter, Counter]:  # type: ignore[type-arg]
    """Per command id: the frames each mower was sent, and how often it executed it."""
    sent: Counter[uuid.UUID] = Counter()
    executed: Counter[uuid.UUID] = Counter()
    for m in mowers:
        mower = sim.fleet.mower(m)
        sent.update(mower.frames())
        executed.update(r.command_id for r in mower.commands or () if r.status == "executed")
    return sent, executed


async def answer_as_the_dying_process(
    bus: Bus, env: CommandEnvelope, status: CommandStatus, reason: str | None
) -> None:
    """Store a final result for ``env`` as the killed process would have, just before it
    died and before it acknowledged the delivery."""
    for s, why in (("accepted", None), (status, reason)):
        result = CommandResult(
            command_id=env.command_id, mower_id=env.mower_id, status=s, at=datetime.now(UTC)
        )
        if why is not None:
            result = msgspec.structs.replace(result, reason=why)
        await bus.publish(
            result_subject(env.mower_id),
            encode(result),
            msg_id=result.msg_id,
            headers={MSG_ID_HEADER: result.msg_id},
        )


@pytest.mark.slow
async def test_sigkill_under_load_loses_nothing_and_repeats_nothing(
    bus: Bus, sim: SimulatorServer, results: ResultLog, nats_server: NatsServer, tmp_path: Path
) -> None:
    log = tmp_path / "gateway.log"
    mowers = sim.registrations()
    ids = [m.mower_id for m in mowers]
    for m in ids:
        await sim.inject(m, LatencyFault(ms=150))
    mowers_json = msgspec.json.encode(mowers).decode()
    # The bound above the 400 commands: the killed process holds every one it did not
    # answer, so all of them come back as redeliveries.
    env_vars = {
        "MOWDECK_COMMAND_ACK_WAIT_SECONDS": ACK_WAIT,
        "MOWDECK_GATEWAY_MAX_IN_FLIGHT": "1000",
    }
    port = free_port()
    proc = spawn_gateway(nats_server.url, mowers_json, port, log, **env_vars)
    envs = [
        command(mowers[i % 4], SetSpeed(speed_mps=0.2 + i % 10 / 10), ttl_s=300) for i in range(400)
    ]
    try:
        await eventually(lambda: ready(port), timeout=30)
        for env in envs:
            await bus.publish_command(env, now=datetime.now(UTC))
        # Under way: some answered, most admitted and waiting at their mowers.
        await eventually(
            lambda: sum(1 for e in envs if results.final(e.command_id)) >= 20, timeout=30
        )
        proc.send_signal(signal.SIGKILL)
        assert await asyncio.to_thread(proc.wait, 30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed_with = {e.command_id for e in envs if results.final(e.command_id) is None}
    accepted_before = {r.command_id for r in results.results if r.status == "accepted"}
    assert len(killed_with) > 100, "the kill came too late to test anything"
    # Two of the commands the killed process held and never sent were answered by it
    # (rejected as preempted, expired) right before it died, unacknowledged.
    sent, _ = sent_and_executed(sim, ids)
    unsent = [e for e in envs if e.command_id in killed_with and not sent[e.command_id]]
    rejected, expired = unsent[-1], unsent[-2]
    await answer_as_the_dying_process(bus, rejected, "rejected", "preempted by emergency_stop")
    await answer_as_the_dying_process(bus, expired, "expired", None)

    port = free_port()
    proc = spawn_gateway(nats_server.url, mowers_json, port, log, **env_vars)
    try:
        for env in envs:
            await results.wait_final(env.command_id, timeout=90)
        finals = final_statuses(results)
        # Every command has exactly one final status; the two answered before the kill
        # keep theirs, and their mowers never saw them.
        assert {c: s for c, s in finals.items() if len(s) != 1} == {}
        assert finals[rejected.command_id] == {"rejected"}
        assert finals[expired.command_id] == {"expired"}
        statuses = Counter(next(iter(finals[e.command_id])) for e in envs)
        # A command at a mower when the link dropped is not run later: the mower answers
        # its resend with "link lost" (docs/device-protocol.md). One per mower at most.
        lost = [r for r in results.results if r.status == "failed"]
        assert all(r.reason == "link lost before the command ran" for r in lost), lost
        assert statuses["failed"] <= len(mowers)
        assert statuses["executed"] + statuses["failed"] == len(envs) - 2, statuses
        # Nothing carried out twice, and nothing sent twice but what was at a mower
        # (or answered by it and not yet stored) when the shard died.
        sent, executed = sent_and_executed(sim, ids)
        assert max(executed[e.command_id] for e in envs) == 1
        assert sent[rejected.command_id] == sent[expired.command_id] == 0
        repeats = {c: n for c, n in sent.items() if n > 1}
        assert all(n == 2 for n in repeats.values()), repeats
        assert len(repeats) <= 4 * len(mowers), repeats
        assert set(repeats) <= accepted_before  # only what the killed process had sent
        # The successor found the two answers and acknowledged them with no new result.
        assert await metric(port, "mowdeck_gateway_commands_answered_before_total") >= 2
        assert await metric(port, "mowdeck_gateway_redeliveries_total") >= len(killed_with)
        print(
            f"killed with {len(killed_with)} unanswered of {len(envs)}; "
            f"{len(repeats)} sent again after the restart; statuses {dict(statuses)}"
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0, log.read_text()[-2000:]
