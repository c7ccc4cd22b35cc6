"""Secrets device links dial with, read from ``MOWDECK_GATEWAY_CREDENTIALS_DIR`` (ADR 0013).

A connection's options name a credential (``"credentials": "<name>"``); the secret is the
JSON object in ``<dir>/<name>.json``, read when a link dials (so a rotated file is used on
the next reconnect) and never put in Fleet, on the bus or in a log. What an object must
hold is the adapter's to say (``username``/``password`` for an MQTT broker,
``client_id``/``client_secret`` for an OAuth2 client); a missing, unreadable or malformed
file is a ``CredentialError`` whose message names the file and what is wrong with it, and
the link reports it as the reason it is down.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TypeVar

import msgspec

from mowdeck.devices.credentials import CREDENTIAL_NAME_PATTERN
from mowdeck.errors import MowdeckError

__all__ = ["CredentialError", "Credentials", "MqttLogin"]

T = TypeVar("T")
_NAME = re.compile(CREDENTIAL_NAME_PATTERN)
_MAX_BYTES = 64 * 1024


class CredentialError(MowdeckError):
    """A named credential cannot be used (missing, unreadable or malformed)."""


class MqttLogin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A broker login: ``{"username": ..., "password": ...}``."""

    username: str
    password: str | None = None


class Credentials:
    """The credentials directory of one gateway (None: the gateway has none)."""

    __slots__ = ("directory",)

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    @classmethod
    def at(cls, directory: str | None) -> Credentials:
        """The credentials in ``directory`` (``MOWDECK_GATEWAY_CREDENTIALS_DIR``), if set."""
        return cls(Path(directory) if directory else None)

    def read(self, name: str, kind: type[T]) -> T:
        """The credential ``name`` as ``kind``; ``CredentialError`` saying why not."""
        if not _NAME.match(name):
            raise CredentialError(f"credential name {name!r} is not a well-formed name")
        if self.directory is None:
            raise CredentialError(
                f"credential {name!r} is needed but MOWDECK_GATEWAY_CREDENTIALS_DIR is not set"
            )
        path = self.directory / f"{name}.json"
        try:
            with path.open("rb") as file:
                data = file.read(_MAX_BYTES + 1)
        except FileNotFoundError:
            raise CredentialError(f"credential {name!r}: {path} does not exist") from None
        except OSError as err:
            raise CredentialError(
                f"credential {name!r}: {path} cannot be read ({err.strerror})"
            ) from None
        if len(data) > _MAX_BYTES:
            raise CredentialError(f"credential {name!r}: {path} is over {_MAX_BYTES} bytes")
        try:
            return msgspec.json.decode(data, type=kind)
        except (msgspec.ValidationError, msgspec.DecodeError) as err:
            # The message names a field or a position, never the secret's value.
            raise CredentialError(f"credential {name!r}: {path} is not valid: {err}") from None
