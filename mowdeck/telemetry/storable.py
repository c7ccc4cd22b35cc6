"""What the contract accepts but PostgreSQL cannot store: NUL characters in text and jsonb."""

from __future__ import annotations

from typing import Any

import msgspec

from contracts.v1 import MowerState

__all__ = ["BACKSLASH", "NUL_ESCAPE", "nul_field"]

# JSON can carry a NUL character only as this escape (a raw control byte is malformed
# JSON), so a payload without it needs no further look.
NUL_ESCAPE = b"\\u0000"
# Every escape starts with a backslash, which a state rarely holds at all. Looking for
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


def nul_field(state: MowerState) -> str | None:
    """The first field of ``state`` with a NUL character in a string or key, or None."""
    for name, value in msgspec.to_builtins(state).items():
        if _holds_nul(value):
            return str(name)
    return None
