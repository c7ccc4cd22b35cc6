"""Settings from ``MOWDECK_*`` environment variables, read once into a frozen struct.

A setting renamed keeps its old variable for one release: ``Annotated[..., Formerly("old")]``
on the new field reads ``MOWDECK_OLD`` when ``MOWDECK_NEW`` is not set, and says so. A
variable no longer read at all is named in the model's ``retired`` with what to do
instead, and said when set. Settings are read before logging is configured (the level is
a setting), so these warnings go through the standard library's logging, which reaches
stderr either way: Python's last-resort handler before, the configured renderer after.
"""

from __future__ import annotations

import logging
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar, get_args, get_origin

import msgspec

from mowdeck.errors import MowdeckError

__all__ = ["BaseSettings", "Formerly", "SettingsError", "env_name", "load_settings"]

PREFIX = "MOWDECK_"
T = TypeVar("T", bound=msgspec.Struct)

Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


_log = logging.getLogger("mowdeck.settings")


class SettingsError(MowdeckError):
    """An environment variable holds a value its setting cannot take."""


@dataclass(frozen=True, slots=True)
class Formerly:
    """A setting's earlier field name, still read for one release (in ``Annotated``)."""

    field: str


class BaseSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What every service reads: the bus, the database, the HTTP listener and logging."""

    # Variables no longer read, each with what to set instead: (variable, instead).
    retired: ClassVar[tuple[tuple[str, str], ...]] = ()

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
    # Large buffers outside the C allocator's heap, two arenas (kit/allocator.py); off:
    # glibc's defaults, or the MALLOC_* variables an operator sets.
    malloc_tuning: bool = True
    # Seconds between trims of the C allocator's heap (kit/allocator.py); 0: never.
    malloc_trim_interval_seconds: Annotated[float, msgspec.Meta(ge=0)] = 60.0


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


def _formerly(tp: Any) -> str | None:
    # Annotated flattens nested metadata, so a marker on an aliased type is found too.
    if get_origin(tp) is not Annotated:
        return None
    found = [m.field for m in get_args(tp)[1:] if isinstance(m, Formerly)]
    return env_name(found[0]) if found else None


def _variable(name: str, old: str | None, env: Mapping[str, str]) -> str:
    """The variable a setting is read from: its own, or its old name while only that is set."""
    if old is None or old not in env:
        return name
    if name in env:
        _log.warning("%s is set and ignored: %s replaces it, and is set too", old, name)
        return name
    _log.warning("%s is deprecated and read for one more release: set %s instead", old, name)
    return old


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
    for variable, instead in getattr(model, "retired", ()):
        if variable in env:
            _log.warning("%s is no longer read: %s", variable, instead)
    raw: dict[str, Any] = {}
    read_from: dict[str, str] = {}  # field -> the variable its value came from
    for field in msgspec.structs.fields(model):
        tp = hints[field.name]
        # A field may carry another name (``msgspec.field(name=...)``) to keep the variable
        # an ADR names while the attribute says what it is.
        name = _variable(env_name(field.encode_name), _formerly(tp), env)
        if name not in env:
            continue
        value: Any = env[name]
        if _is_structured(tp) and not _is_text(tp):
            try:
                value = msgspec.json.decode(value)
            except msgspec.DecodeError as err:
                raise SettingsError(f"{name}: expected JSON ({err})") from err
        elif value == "" and not _is_text(tp):
            continue
        raw[field.encode_name] = value
        read_from[field.encode_name] = name
    try:
        return msgspec.convert(raw, model, strict=False)
    except msgspec.ValidationError as err:
        raise SettingsError(_name_variable(str(err), read_from)) from err


def _name_variable(message: str, read_from: Mapping[str, str]) -> str:
    # msgspec says "... - at `$.field[0].x`"; name the environment variable instead.
    text, sep, path = message.rpartition(" - at `$.")
    if not sep:
        return message
    field = path.rstrip("`").split("[")[0].split(".")[0]
    rest = path.rstrip("`")[len(field) :]
    variable = read_from.get(field, env_name(field))
    return f"{variable}: {text}" + (f" (at {rest})" if rest else "")
