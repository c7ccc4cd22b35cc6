"""Golden JSON: the wire form of every v1 model is fixed; a change shows up here first."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.v1 import (
    CommandEnvelope,
    CommandResult,
    EventEnvelope,
    MowerLink,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    Struct,
    decode,
    decode_command,
    decode_event,
    encode,
)
from contracts.v1.schema import stale_schemas
from tests.unit.contracts.samples import SAMPLES

GOLDEN = Path(__file__).parent.parent / "golden"


def _decode(data: bytes, sample: Struct) -> Struct:
    if isinstance(sample, EventEnvelope):
        return decode_event(data)
    if isinstance(sample, CommandEnvelope):
        return decode_command(data)
    model = type(sample)
    assert model in (
        CommandResult,
        MowerState,
        MowerRegistration,
        MowerListRequest,
        MowerListReply,
        MowerLink,
    )
    return decode(data, model)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_golden_json(name: str) -> None:
    sample = SAMPLES[name]
    golden = (GOLDEN / f"{name}.json").read_bytes().strip()
    assert encode(sample) == golden
    assert _decode(golden, sample) == sample


def test_every_golden_file_has_a_sample() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(SAMPLES)


def test_exported_json_schemas_are_current() -> None:
    stale = stale_schemas()
    assert not stale, f"run `mowdeck contracts export`; stale: {stale}"


def test_a_result_without_a_kind_still_decodes() -> None:
    # Gateways before contracts v1.1 publish results without the kind.
    old = b'{"command_id":"c0ffee00-1234-4abc-8def-0123456789ab","mower_id":"6f1c2a9e-0d3b-4c55-9a7e-2b8f3c4d5e6f","status":"executed","at":"2026-05-01T12:00:00Z"}'  # noqa: E501 - one message
    assert decode(old, CommandResult).kind is None
