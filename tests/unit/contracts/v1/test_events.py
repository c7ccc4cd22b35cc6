"""Event envelopes: payload type follows from type and version; subjects and shards."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from contracts.v1 import (
    EVENT_PAYLOADS,
    Connection,
    ContractError,
    EventEnvelope,
    GrantsChanged,
    MowerLink,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    UserRef,
    decode,
    decode_event,
    encode,
    shard_of,
)
from contracts.v1.subjects import (
    command_subject,
    emergency_subject,
    event_subject,
    event_type_from_subject,
    mower_id_from_subject,
    result_subject,
    telemetry_subject,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MOWER = uuid.UUID("00000000-0000-4000-8000-000000000007")
ACCOUNT = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
REG = MowerRegistration(
    mower_id=MOWER,
    account_id=ACCOUNT,
    name="Front lawn",
    connection=Connection(kind="simulator", options={"url": "ws://x"}),
)


@pytest.mark.parametrize(
    ("event_type", "payload"),
    [
        ("mower.registered", REG),
        ("mower.updated", REG),
        ("mower.removed", REG),
        ("mower.connected", MowerLink(mower_id=MOWER)),
        ("mower.disconnected", MowerLink(mower_id=MOWER, reason="link lost")),
        ("identity.user.disabled", UserRef(user_id="alice")),
        ("identity.user.deleted", UserRef(user_id="alice", account_id=ACCOUNT)),
        ("identity.grants.changed", GrantsChanged(account_id=ACCOUNT)),
    ],
)
def test_events_round_trip_with_their_payload_type(event_type: str, payload: object) -> None:
    event = EventEnvelope.new(event_type, payload, producer="test", now=NOW, account_id=ACCOUNT)
    decoded = decode_event(encode(event))
    assert decoded == event
    assert type(decoded.payload) is EVENT_PAYLOADS[(event_type, 1)]


def test_wrong_payload_for_the_type_is_refused() -> None:
    with pytest.raises(ContractError, match="`payload`"):
        EventEnvelope.new("mower.connected", REG, producer="t", now=NOW)
    event = EventEnvelope.new("mower.registered", REG, producer="t", now=NOW)
    doc = json.loads(encode(event))
    doc["type"] = "mower.connected"
    # The payload is read as the model the type names, so a mismatch names the field.
    with pytest.raises(ContractError, match=r"`mower_id` - at `\$\.payload`"):
        decode_event(json.dumps({**doc, "payload": {"reason": "x"}}))


@pytest.mark.parametrize(
    ("event_type", "version"),
    [("mower.exploded", 1), ("mower.registered", 2)],
    ids=["unknown-type", "unknown-version"],
)
def test_unknown_event_type_or_version_is_refused(event_type: str, version: int) -> None:
    doc = json.loads(encode(EventEnvelope.new("mower.registered", REG, producer="t", now=NOW)))
    doc.update(type=event_type, version=version)
    with pytest.raises(ContractError, match="not a v1 event"):
        decode_event(json.dumps(doc))


def test_subject_helpers_round_trip() -> None:
    assert mower_id_from_subject(command_subject(MOWER)) == MOWER
    assert mower_id_from_subject(result_subject(MOWER)) == MOWER
    assert mower_id_from_subject(telemetry_subject(MOWER)) == MOWER
    assert mower_id_from_subject(emergency_subject(MOWER)) == MOWER
    assert command_subject(MOWER) == f"command.mower.{MOWER}"
    assert emergency_subject(MOWER) == f"emergency.mower.{MOWER}"
    assert result_subject(MOWER) == f"command.result.mower.{MOWER}"
    assert event_subject("mower.registered") == "event.mower.registered"
    assert event_type_from_subject("event.identity.user.deleted") == "identity.user.deleted"


@pytest.mark.parametrize(
    "subject",
    [
        "command.mower.not-a-uuid",
        "command.mower.",
        "emergency.mower.",
        "fleet.mowers.list",
        "telemetry.mower",
    ],
)
def test_subject_without_a_mower_id_is_refused(subject: str) -> None:
    with pytest.raises(ContractError, match="subject"):
        mower_id_from_subject(subject)


def test_sharding_is_static_modulo() -> None:
    ids = [uuid.UUID(int=i) for i in range(12)]
    assert [shard_of(m, 3) for m in ids] == [i % 3 for i in range(12)]
    request = MowerListRequest(shard_index=1, shard_count=3)
    assert [m.int for m in ids if request.owns(m)] == [1, 4, 7, 10]
    with pytest.raises(ContractError, match="shard_index"):
        MowerListRequest(shard_index=3, shard_count=3)


def test_mower_list_pages_cover_the_shard_exactly_once() -> None:
    regs = [
        MowerRegistration(
            mower_id=uuid.UUID(int=i),
            account_id=ACCOUNT,
            name=f"m{i}",
            connection=Connection(kind="simulator"),
        )
        for i in reversed(range(25))
    ]
    request: MowerListRequest | None = MowerListRequest(shard_index=1, shard_count=2, limit=5)
    seen: list[int] = []
    pages = 0
    while request is not None:
        reply = request.answer(regs)
        seen += [m.mower_id.int for m in reply.mowers]
        pages += 1
        request = request.next_page(reply)
    assert seen == list(range(1, 25, 2))
    assert pages == 3


@pytest.mark.parametrize("depth", [100, 5000], ids=["deep", "deeper-than-the-stack"])
def test_a_document_nested_too_deeply_is_undecodable_not_a_crash(depth: int) -> None:
    # A free-form field (``raw``) nested thousands of levels deep: before, the decoder's
    # RecursionError escaped every consumer's "undecodable" handling.
    raw = "[" * depth + "]" * depth
    state = (
        '{"mower_id": "6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f",'
        ' "account_id": "a0c1e2f3-4455-4677-8899-aabbccddeeff",'
        ' "observed_at": "2026-05-01T12:00:00Z", "activity": "idle", "battery": 50,'
        f' "raw": {{"deep": {raw}}}}}'
    )
    if depth <= 100:
        assert decode(state, MowerState).raw["deep"] is not None
        return
    with pytest.raises(ContractError, match="nested too deeply"):
        decode(state, MowerState)
    with pytest.raises(ContractError, match="nested too deeply"):
        decode_event('{"type": "mower.registered", "payload": ' + raw + "}")
