"""The command ids a shard and its controllers remember (``mowdeck.gateway.memory``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from contracts.v1 import CommandEnvelope, StartMow
from mowdeck.gateway.memory import REMEMBER_AFTER_EXPIRY_S, CommandMemory

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000001")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


def envelope(*, ttl_s: float, now: datetime) -> CommandEnvelope:
    return CommandEnvelope.issue(
        mower_id=MOWER,
        account_id=ACCOUNT,
        command=StartMow(),
        issued_by="user:a",
        now=now,
        ttl=timedelta(seconds=ttl_s),
    )


def test_an_id_is_known_again_until_its_time_after_expiry_is_up() -> None:
    memory = CommandMemory(limit=10)
    env = envelope(ttl_s=10, now=T0)
    assert memory.remember(env, T0) is False
    assert env.command_id in memory
    last = T0 + timedelta(seconds=10 + REMEMBER_AFTER_EXPIRY_S)
    assert memory.remember(env, last) is True  # a redelivery, still in time
    memory.remember(envelope(ttl_s=10, now=last), last + timedelta(seconds=1))
    assert env.command_id not in memory
    assert memory.remember(env, last + timedelta(seconds=1)) is False  # forgotten: new again


def test_ids_are_forgotten_after_expiry_and_beyond_the_limit() -> None:
    memory = CommandMemory(after_expiry_s=60, limit=3)
    old = envelope(ttl_s=10, now=T0)
    memory.remember(old, T0)
    assert old.command_id in memory
    later = T0 + timedelta(seconds=71)  # 10 s ttl + 60 s kept + 1
    fresh = envelope(ttl_s=10, now=later)
    memory.remember(fresh, later)
    assert old.command_id not in memory
    assert fresh.command_id in memory
    for env in [envelope(ttl_s=10, now=later) for _ in range(3)]:
        memory.remember(env, later)
    assert len(memory) == 3
    assert fresh.command_id not in memory  # the oldest went first


def test_only_command_ids_are_asked_for() -> None:
    memory = CommandMemory(limit=1)
    env = envelope(ttl_s=10, now=T0)
    memory.remember(env, T0)
    assert env.command_id.int not in memory  # an id's integer is not an id
