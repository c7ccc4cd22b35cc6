"""The exported JSON Schemas against the decoders: what a schema admits, the decoders take.

Instances are generated from every exported file (formats honoured). One that also keeps
the cross-field rules the schema's description states decodes; one that breaks a rule is
refused naming it; and every decoded message re-encodes to an instance of its schema.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from contracts.v1 import (
    CommandResult,
    ContractError,
    MowerLink,
    MowerListReply,
    MowerListRequest,
    MowerRegistration,
    MowerState,
    SiteAreasReply,
    SiteAreasRequest,
    decode,
    decode_command,
    decode_event,
    encode,
)
from contracts.v1.schema import SCHEMA_DIR

SCHEMAS = {p.name: json.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.json"))}
_FIXED = {
    "CommandResult.json": CommandResult,
    "MowerState.json": MowerState,
    "MowerRegistration.json": MowerRegistration,
    "MowerListRequest.json": MowerListRequest,
    "MowerListReply.json": MowerListReply,
    "MowerLink.json": MowerLink,
    "SiteAreasRequest.json": SiteAreasRequest,
    "SiteAreasReply.json": SiteAreasReply,
}


def _decoder(name: str) -> Callable[[bytes], Any]:
    if name.startswith("event."):
        return decode_event
    if name == "CommandEnvelope.json":
        return decode_command
    model = _FIXED[name]
    return lambda data: decode(data, model)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))


def _command_rules(instance: dict[str, Any]) -> str | None:
    if _at(instance["expires_at"]) <= _at(instance["issued_at"]):
        return "`expires_at` must be after `issued_at`"
    if instance.get("priority") == "emergency" and instance["command"]["kind"] != (
        "emergency_stop"
    ):
        return "`priority` may be `emergency` only for an `emergency_stop` command"
    return None


def _shard_rules(instance: dict[str, Any]) -> str | None:
    if instance.get("shard_index", 0) >= instance.get("shard_count", 1):
        return "`shard_index` must be less than `shard_count`"
    return None


# The rules each schema's description states, as the message a decoder refuses with.
CROSS_FIELD_RULES: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "CommandEnvelope.json": _command_rules,
    "MowerListRequest.json": _shard_rules,
}

# hypothesis-jsonschema knows no ``uuid`` format: without this it draws any string.
FORMATS = {"uuid": st.uuids().map(str)}

_validators = {
    name: jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for name, schema in SCHEMAS.items()
}


def test_every_model_and_event_is_exported_and_covered() -> None:
    events = [n for n in SCHEMAS if n.startswith("event.")]
    assert len(events) >= 9
    assert set(SCHEMAS) == {*events, "CommandEnvelope.json", *_FIXED}


def test_the_rules_are_stated_in_the_descriptions() -> None:
    def text(name: str) -> str:
        top = SCHEMAS[name]["$defs"][SCHEMAS[name]["$ref"].rsplit("/", 1)[-1]]
        return " ".join(top["description"].split())

    command = text("CommandEnvelope.json")
    assert "``expires_at`` is strictly after ``issued_at``" in command
    assert "``priority`` may be ``emergency`` only when ``command.kind``" in command
    assert "``shard_index`` is less than ``shard_count``" in text("MowerListRequest.json")


@pytest.mark.parametrize("name", sorted(n for n in SCHEMAS if n.startswith("event.")))
def test_an_event_schema_admits_only_its_own_type_and_version(name: str) -> None:
    envelope = SCHEMAS[name]["$defs"][SCHEMAS[name]["$ref"].rsplit("/", 1)[-1]]
    event_type, version = name.removeprefix("event.").removesuffix(".json").rsplit(".v", 1)
    assert envelope["properties"]["type"]["const"] == event_type
    assert envelope["properties"]["version"]["const"] == int(version)
    other = "mower.removed" if event_type != "mower.removed" else "mower.registered"
    assert not _validators[name].is_valid(
        {"id": "0" * 8 + "-0000-4000-8000-" + "0" * 12, "type": other}
    )


def _check_instance(name: str, instance: Any) -> None:
    data = json.dumps(instance).encode()
    broken = CROSS_FIELD_RULES.get(name, lambda _: None)(instance)
    if broken is not None:
        with pytest.raises(ContractError, match=broken.replace("`", ".")):
            _decoder(name)(data)
        return
    message = _decoder(name)(data)
    again = json.loads(encode(message))
    errors = [e.message for e in _validators[name].iter_errors(again)]
    assert not errors, f"{name}: re-encoded {again} is not schema-valid: {errors}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_valid_instances_decode_and_re_encode_valid(name: str) -> None:
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            # hypothesis-jsonschema draws formats (uuid, date-time) by filtering strings
            HealthCheck.filter_too_much,
        ],
    )
    @given(from_schema(SCHEMAS[name], custom_formats=FORMATS))
    def run(instance: Any) -> None:
        assert _validators[name].is_valid(instance)
        _check_instance(name, instance)

    run()
