"""Event ids: the position in each of the three streams, written ``t812.c77.e5``."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Position", "format_position", "parse_position"]


class Position(NamedTuple):
    """Stream sequences last seen of TELEMETRY, COMMANDS and EVENTS."""

    telemetry: int
    commands: int
    events: int


def format_position(position: Position) -> str:
    """The event id of ``position``."""
    return f"t{position.telemetry}.c{position.commands}.e{position.events}"


def parse_position(text: str) -> Position | None:
    """The position an event id names, or None when it is not one."""
    parts = text.strip().split(".")
    if len(parts) != 3:
        return None
    numbers: list[int] = []
    for part, letter in zip(parts, "tce", strict=True):
        digits = part[1:]
        if part[:1] != letter or not digits.isdigit() or not digits.isascii():
            return None
        numbers.append(int(digits))
    return Position(*numbers)
