"""Settings from ``MOWDECK_*`` environment variables, read once into a frozen struct."""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar, get_args, get_origin

import msgspec

from mowdeck.errors import MowdeckError

__all__ = ["BaseSettings", "SettingsError", "env_name", "load_settings"]

PREFIX = "MOWDECK_"
T = TypeVar("T", bound=msgspec.Struct)

Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class SettingsError(MowdeckError):
    """An environment variable holds a value its setting cannot take."""


class BaseSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What every service reads: the bus, the database, the HTTP listener and logging."""

    nats_url: str = "nats://127.0.0.1:4222"
    # The lean NATS client (mowdeck/kit/wire.py); off: nats-py's stock client (docs/operations.md).
    nats_fast_path: bool = True
    # The service's own NATS user (docs/operations.md, "Bus credentials"): a user and
    # password, or an NKey seed file; TLS verified against a CA file when one is given.
    nats_user: str | None = None
    nats_password: str | None = None
    nats_nkey_seed_file: str | None = None
    nats_tls_ca_file: str | None = None
    # Replicas of a stream this process creates (3 in a cluster); an existing one keeps its own.
    stream_replicas: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1
    database_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    # The longest a statement on the service's pool may run before PostgreSQL cancels it
    # (0: no limit). Far above the slowest query the APIs allow (tests/bench/slow_queries.py:
    # 31 days in 4,960 bins, 0.17 s typical, 1.7 s at worst on a busy machine; see
    # docs/operations.md, "Database timeouts"): it is there for the statement that would
    # otherwise run on, holding a connection.
    database_statement_timeout_ms: Annotated[int, msgspec.Meta(ge=0)] = 10_000
    # The same for the paths that legitimately run longer: retention and pruning rounds,
    # and migrations (`mowdeck migrate`, the demo's start).
    database_maintenance_statement_timeout_ms: Annotated[int, msgspec.Meta(ge=0)] = 600_000
    http_host: str = "127.0.0.1"
    http_port: Port = 8080
    # Origins (scheme://host:port) whose pages may call this service's API from a browser;
    # empty: same origin only. JSON, e.g. ["http://127.0.0.1:8084"].
    http_cors_origins: list[str] = []
    log_level: typing.Literal["debug", "info", "warning", "error"] = "info"
    log_format: typing.Literal["auto", "json", "console"] = "auto"
    shutdown_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0


def env_name(field: str) -> str:
    """The environment variable of a settings field."""
    return f"{PREFIX}{field.upper()}"


def _strip(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _is_text(tp: Any) -> bool:
    tp = _strip(tp)
    if tp is str:
        return True
    if get_origin(tp) is typing.Literal:
        return all(isinstance(arg, str) for arg in get_args(tp))
    if get_origin(tp) in (typing.Union, types.UnionType):
        return any(_is_text(arg) for arg in get_args(tp) if arg is not type(None))
    return False


def _is_structured(tp: Any) -> bool:
    tp = _strip(tp)
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_is_structured(arg) for arg in get_args(tp))
    if origin in (list, dict, tuple, set, frozenset):
        return True
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def load_settings(model: type[T], environ: Mapping[str, str] | None = None) -> T:
    """Read ``model`` from ``MOWDECK_<FIELD>`` variables; unset ones keep their default."""
    env = os.environ if environ is None else environ
    hints = typing.get_type_hints(model, include_extras=True)
    raw: dict[str, Any] = {}
    for field in msgspec.structs.fields(model):
        # A field may carry another name (``msgspec.field(name=...)``) to keep the variable
        # an ADR names while the attribute says what it is.
        name = env_name(field.encode_name)
        if name not in env:
            continue
        value: Any = env[name]
        tp = hints[field.name]
        if _is_structured(tp) and not _is_text(tp):
            try:
                value = msgspec.json.decode(value)
            except msgspec.DecodeError as err:
                raise SettingsError(f"{name}: expected JSON ({err})") from err
        elif value == "" and not _is_text(tp):
            continue
        raw[field.encode_name] = value
    try:
        return msgspec.convert(raw, model, strict=False)
    except msgspec.ValidationError as err:
        raise SettingsError(_name_variable(str(err))) from err


def _name_variable(message: str) -> str:
    # msgspec says "... - at `$.field[0].x`"; name the environment variable instead.
    text, sep, path = message.rpartition(" - at `$.")
    if not sep:
        return message
    field = path.rstrip("`").split("[")[0].split(".")[0]
    rest = path.rstrip("`")[len(field) :]
    return f"{env_name(field)}: {text}" + (f" (at {rest})" if rest else "")
