"""Pure rules: request bodies name the failing field; connections, ttl, wait, shards."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from contracts.v1 import Connection, MowerListRequest, MowerRegistration, decode_event
from mowdeck.devices.endpoints import DeviceHosts, EndpointPolicy
from mowdeck.devices.kinds import OPENMOWER, SIMULATOR, ConnectionKinds
from mowdeck.fleet.errors import InvalidRequestError
from mowdeck.fleet.rules import (
    MAX_OPTIONS_BYTES,
    MAX_OPTIONS_DEPTH,
    CommandRequest,
    PatchRequest,
    RegisterRequest,
    apply_patch,
    command_ttl,
    decode_body,
    issue_command,
    new_registration,
    parse_wait,
    registry_event,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KINDS = {"simulator"}
REG = MowerRegistration(
    mower_id=uuid.uuid4(),
    account_id=uuid.uuid4(),
    name="M",
    connection=Connection(kind="simulator"),
)


@pytest.mark.parametrize(
    ("body", "model", "field"),
    [
        (b'{"connection": {"kind": "simulator"}}', RegisterRequest, "name"),
        (b'{"name": "", "connection": {"kind": "simulator"}}', RegisterRequest, "name"),
        (b'{"name": "M", "connection": {}}', RegisterRequest, "connection.kind"),
        (
            b'{"name": "M", "connection": {"kind": "simulator", "options": 3}}',
            RegisterRequest,
            "connection.options",
        ),
        (b'{"name": "M", "connection": {"kind": "x"}, "mower_id": 1}', RegisterRequest, "mower_id"),
        (b'{"name": 1}', PatchRequest, "name"),
        (
            b'{"command": {"kind": "set_speed", "speed_mps": 9}}',
            CommandRequest,
            "command.speed_mps",
        ),
        (b'{"command": {"kind": "warp"}}', CommandRequest, "command.kind"),
        (b'{"command": {}}', CommandRequest, "command.kind"),
        (b'{"command": {"kind": "pause_mow"}, "ttl_s": -1}', CommandRequest, "ttl_s"),
        (b"[]", CommandRequest, "body"),
        (b"{oops", CommandRequest, ""),
    ],
    ids=[
        "missing-name",
        "empty-name",
        "missing-kind",
        "options-not-object",
        "bad-mower-id",
        "patch-name-type",
        "speed-range",
        "unknown-kind",
        "command-without-kind",
        "negative-ttl",
        "not-an-object",
        "malformed-json",
    ],
)
def test_decode_body_names_the_field(body: bytes, model: type, field: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        decode_body(body, model)
    assert err.value.field == field


# Deeper than the decoder's recursion limit on every supported Python (3.13's deeper C
# stack decodes 5,000 levels; none decodes 20,000).
_NESTED = b"[" * 20_000 + b"]" * 20_000


@pytest.mark.parametrize(
    ("body", "model"),
    [
        (b'{"name": "M", "tags": ' + _NESTED + b"}", RegisterRequest),
        (
            b'{"name": "M", "connection": {"kind": "simulator", "options": {"a": '
            + _NESTED
            + b"}}}",
            RegisterRequest,
        ),
        (b'{"x": ' + b"{" * 100_000, PatchRequest),
        (
            b'{"command": {"kind": "pause_mow"}, "x": ' + _NESTED + b"}",
            CommandRequest,
        ),
    ],
    ids=[
        "nested-unknown-register-field",
        "nested-options",
        "unclosed-objects",
        "nested-unknown-command-field",
    ],
)
def test_a_deeply_nested_body_is_a_bad_request_not_a_crash(body: bytes, model: type) -> None:
    with pytest.raises(InvalidRequestError) as err:
        decode_body(body, model)
    assert err.value.field == ""  # answered 400, like malformed JSON


def _options(size: int = 0, depth: int = 1) -> Connection:
    options: dict[str, object] = {"blob": "x" * size}
    for _ in range(depth - 1):
        options = {"nested": options}
    return Connection(kind="simulator", options=options)


@pytest.mark.parametrize(
    ("connection", "refused"),
    [
        (_options(MAX_OPTIONS_BYTES - len('{"blob":""}')), False),
        (_options(MAX_OPTIONS_BYTES - len('{"blob":""}') + 1), True),
        (_options(depth=MAX_OPTIONS_DEPTH), False),
        (_options(depth=MAX_OPTIONS_DEPTH + 1), True),
        (_options(depth=5000), True),
    ],
    ids=["at-size-limit", "one-byte-over", "at-depth-limit", "one-level-deeper", "very-deep"],
)
def test_connection_options_are_bounded_at_register_and_patch(
    connection: Connection, refused: bool
) -> None:
    register = RegisterRequest(name="M", connection=connection)
    patch = PatchRequest(connection=connection)
    for change in (
        lambda: new_registration(register, REG.account_id, KINDS),
        lambda: apply_patch(REG, patch, KINDS),
    ):
        if not refused:
            assert change().connection == connection
            continue
        with pytest.raises(InvalidRequestError) as err:
            change()
        assert err.value.field == "connection.options"
        assert err.value.detail.startswith("`connection.options`")


def test_the_size_limit_is_named_in_the_refusal() -> None:
    with pytest.raises(InvalidRequestError) as err:
        new_registration(
            RegisterRequest(name="M", connection=_options(20_000)), REG.account_id, KINDS
        )
    assert f"at most {MAX_OPTIONS_BYTES} bytes" in err.value.detail


def test_decode_body_accepts_good_bodies_and_ignores_unknown_fields() -> None:
    req = decode_body(
        b'{"command": {"kind": "manual_drive", "linear_mps": 0.5, "angular_rps": 0}, "x": 1}',
        CommandRequest,
    )
    assert req.command.ttl_ms == 1000  # type: ignore[union-attr]


def test_registration_needs_an_installed_kind_and_keeps_a_given_id() -> None:
    given = uuid.uuid4()
    req = RegisterRequest(name="M", connection=Connection(kind="simulator"), mower_id=given)
    assert new_registration(req, REG.account_id, KINDS).mower_id == given
    with pytest.raises(InvalidRequestError) as err:
        new_registration(req, REG.account_id, {"mqtt"})
    assert (err.value.field, "mqtt" in err.value.detail) == ("connection.kind", True)


@pytest.mark.parametrize(
    ("patch", "name", "kind"),
    [
        (PatchRequest(name="New"), "New", "simulator"),
        (PatchRequest(connection=Connection(kind="simulator", options={"p": 1})), "M", "simulator"),
    ],
    ids=["rename", "reconnect"],
)
def test_apply_patch_changes_only_what_is_sent(patch: PatchRequest, name: str, kind: str) -> None:
    changed = apply_patch(REG, patch, KINDS)
    assert (changed.name, changed.connection.kind, changed.mower_id) == (name, kind, REG.mower_id)


ENDPOINTS = EndpointPolicy(DeviceHosts(["mowers.example.com"]), {"simulator": "url"})


@pytest.mark.parametrize(
    ("url", "refused"),
    [("wss://mowers.example.com/m/1", False), ("ws://127.0.0.1:5432/", True), (7, True)],
    ids=["allowed", "not-allowed", "not-text"],
)
def test_a_device_url_must_be_allowed_at_register_and_patch(url: object, refused: bool) -> None:
    connection = Connection(kind="simulator", options={"url": url})
    register = RegisterRequest(name="M", connection=connection)
    for attempt in (
        lambda: new_registration(register, REG.account_id, KINDS, ENDPOINTS),
        lambda: apply_patch(REG, PatchRequest(connection=connection), KINDS, ENDPOINTS),
    ):
        if not refused:
            assert attempt().connection == connection
            continue
        with pytest.raises(InvalidRequestError) as err:
            attempt()
        assert err.value.field == "connection.options.url"
        assert err.value.detail.startswith("`connection.options.url`")


def test_an_empty_patch_is_refused() -> None:
    with pytest.raises(InvalidRequestError):
        apply_patch(REG, PatchRequest(), KINDS)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [(None, 30.0), (5.0, 5.0), (300.0, 300.0), (1.0, 1.0)],
    ids=["default", "given", "at-maximum", "at-minimum"],
)
def test_command_ttl(requested: float | None, expected: float) -> None:
    assert command_ttl(requested, default=30, maximum=300) == timedelta(seconds=expected)


@pytest.mark.parametrize(
    "requested", [301, 0.0003, 0.999], ids=["over-maximum", "tiny", "under-1s"]
)
def test_command_ttl_outside_the_limits_is_refused(requested: float) -> None:
    with pytest.raises(InvalidRequestError) as err:
        command_ttl(requested, default=30, maximum=300)
    assert err.value.field == "ttl_s"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 0.0), ("", 0.0), ("2.5", 2.5), ("60", 60.0), ("0", 0.0), (".5", 0.5), ("5.", 5.0)],
    ids=["absent", "empty", "fraction", "maximum", "zero", "leading-point", "trailing-point"],
)
def test_parse_wait(raw: str | None, expected: float) -> None:
    assert parse_wait(raw, maximum=60) == expected


@pytest.mark.parametrize(
    "raw",
    ["soon", "-1", "61", "nan", "inf", "1_0", "1e1", " 1", "1 ", "+1", "0x10", "\u0663", "."],
)
def test_parse_wait_refuses(raw: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        parse_wait(raw, maximum=60)
    assert err.value.field == "wait"


def test_issue_command_derives_priority_and_expiry() -> None:
    req = decode_body(b'{"command": {"kind": "emergency_stop"}}', CommandRequest)
    envelope = issue_command(req, REG, issued_by="user:a", now=NOW, ttl=timedelta(seconds=30))
    assert (envelope.priority, envelope.expires_at, envelope.account_id) == (
        "emergency",
        NOW + timedelta(seconds=30),
        REG.account_id,
    )


def test_registry_event_is_a_v1_event_with_its_id_and_subject() -> None:
    row = registry_event("mower.updated", REG, now=NOW)
    event = decode_event(row.body)
    assert (row.subject, event.id, event.payload, event.account_id) == (
        "event.mower.updated",
        row.event_id,
        REG,
        REG.account_id,
    )


def test_list_answers_partition_by_shard() -> None:
    regs = [
        MowerRegistration(
            mower_id=uuid.UUID(int=i),
            account_id=REG.account_id,
            name="M",
            connection=REG.connection,
        )
        for i in range(10)
    ]
    shards = [MowerListRequest(shard_index=i, shard_count=3).answer(regs) for i in range(3)]
    assert [[r.mower_id.int for r in s.mowers] for s in shards] == [
        [0, 3, 6, 9],
        [1, 4, 7],
        [2, 5, 8],
    ]
    assert len(MowerListRequest().answer(regs).mowers) == 10


@pytest.mark.parametrize(
    "body",
    [b'{"command": {"kind": "start"}}', b'{"command": {}}'],
    ids=["unknown-kind", "no-kind"],
)
def test_a_bad_command_kind_lists_the_valid_ones(body: bytes) -> None:
    with pytest.raises(InvalidRequestError) as err:
        decode_body(body, CommandRequest)
    assert "start_mow" in str(err.value)
    assert "return_to_dock" in str(err.value)


OPENMOWER_ENDPOINTS = ConnectionKinds([SIMULATOR, OPENMOWER]).policy(DeviceHosts(["10.0.0.0/8"]))


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"broker": "mqtt://10.0.0.9:1883", "credentials": "yard"}, None),
        (
            {"broker": "mqtt://10.0.0.9:1883", "credentials": "a/b"},
            "connection.options.credentials",
        ),
        (
            {"broker": "mqtt://10.0.0.9:1883", "datum": {"lat": "x", "lon": 1}},
            "connection.options.datum.lat",
        ),
        ({"prefix": "m1"}, "connection.options.broker"),
    ],
    ids=["good", "credential-name", "datum", "no-broker"],
)
def test_openmower_options_are_checked_at_register_and_patch(
    options: dict[str, object], field: str | None
) -> None:
    connection = Connection(kind="openmower", options=options)
    kinds = {"simulator", "openmower"}
    register = RegisterRequest(name="M", connection=connection)
    for attempt in (
        lambda: new_registration(register, REG.account_id, kinds, OPENMOWER_ENDPOINTS),
        lambda: apply_patch(REG, PatchRequest(connection=connection), kinds, OPENMOWER_ENDPOINTS),
    ):
        if field is None:
            assert attempt().connection == connection
            continue
        with pytest.raises(InvalidRequestError) as err:
            attempt()
        assert err.value.field == field
        assert err.value.detail.startswith(f"`{field}`")
