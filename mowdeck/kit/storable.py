"""What the contracts accept but PostgreSQL cannot store: NUL characters in text and jsonb.

A service that stores what it decodes refuses such a message at decode time, naming the
field, instead of letting the database fail the statement (and, for a batch, every
message in it).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["may_hold_nul", "nul_field"]

# JSON can carry a NUL character only as this escape (a raw control byte is malformed
# JSON), so a payload without it needs no further look.
NUL_ESCAPE = b"\\u0000"
# Every escape starts with a backslash, which a message rarely holds at all. Looking for
# one byte (an int) is a memchr, some 20 ns for a state; the escape itself is a substring
# search, about 400 ns: the byte goes first.
BACKSLASH = ord("\\")


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def may_hold_nul(data: bytes) -> bool:
    """False when the JSON text ``data`` cannot hold a NUL character (the cheap test)."""
    return BACKSLASH in data and NUL_ESCAPE in data


def nul_field(message: Any) -> str | None:
    """The first field of ``message`` (a struct) with a NUL character in a string or key.

    Nested fields are named with dots (``connection.options``); None when there is none.
    """
    return _nul_path(msgspec.to_builtins(message), "")


def _nul_path(value: Any, path: str) -> str | None:
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if _holds_nul(key):
                return path or here
            found = _nul_path(item, here)
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        return path if any(_holds_nul(item) for item in value) else None
    return path if _holds_nul(value) else None
