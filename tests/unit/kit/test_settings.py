"""Settings come from MOWDECK_* variables; a bad value names the variable."""

from __future__ import annotations

import logging
from typing import Annotated, ClassVar

import msgspec
import pytest

from mowdeck.kit.settings import BaseSettings, Formerly, SettingsError, load_settings


class Example(BaseSettings, frozen=True, kw_only=True):
    shard_index: int = 0
    ratio: float = 0.5
    enabled: bool = False
    mowers: list[dict[str, int]] = []
    note: str | None = None


def test_defaults_without_environment() -> None:
    s = load_settings(Example, {})
    assert (s.http_port, s.shard_index, s.mowers, s.note) == (8080, 0, [], None)


def test_values_are_coerced_from_strings() -> None:
    s = load_settings(
        Example,
        {
            "MOWDECK_HTTP_PORT": "9000",
            "MOWDECK_SHARD_INDEX": "3",
            "MOWDECK_RATIO": "1.5",
            "MOWDECK_ENABLED": "true",
            "MOWDECK_MOWERS": '[{"a": 1}]',
            "MOWDECK_NOTE": "hi",
            "OTHER_HTTP_PORT": "1",
        },
    )
    assert (s.http_port, s.shard_index, s.ratio, s.enabled, s.mowers, s.note) == (
        9000,
        3,
        1.5,
        True,
        [{"a": 1}],
        "hi",
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MOWDECK_HTTP_PORT": "eighty"}, "MOWDECK_HTTP_PORT: Expected `int`"),
        ({"MOWDECK_HTTP_PORT": "70000"}, "MOWDECK_HTTP_PORT: Expected `int` <= 65535"),
        ({"MOWDECK_MOWERS": "[{"}, "MOWDECK_MOWERS: expected JSON"),
        ({"MOWDECK_MOWERS": '[{"a": "x"}]'}, "MOWDECK_MOWERS: Expected `int`"),
        ({"MOWDECK_LOG_LEVEL": "loud"}, "MOWDECK_LOG_LEVEL: Invalid enum value 'loud'"),
    ],
    ids=["not-int", "out-of-range", "bad-json", "bad-item", "bad-enum"],
)
def test_invalid_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(Example, env)
    assert str(err.value).startswith(message)


def test_settings_are_frozen() -> None:
    class Undeclared(BaseSettings, kw_only=True):  # frozen because BaseSettings is
        note: str = ""

    s = load_settings(Undeclared, {})
    with pytest.raises(AttributeError):
        s.http_port = 1  # type: ignore[misc]


Batch = Annotated[int, msgspec.Meta(ge=1, le=100)]


class Renamed(BaseSettings, frozen=True, kw_only=True):
    retired: ClassVar[tuple[tuple[str, str], ...]] = (
        ("MOWDECK_OLD_URL", "set MOWDECK_OTHER_DATABASE=true instead"),
    )

    relay_batch: Annotated[Batch, Formerly("outbox_batch")] = 5
    relay_poll_seconds: Annotated[float, Formerly("outbox_poll_seconds")] = 1.0


@pytest.mark.parametrize(
    ("env", "batch", "warnings"),
    [
        ({}, 5, []),
        ({"MOWDECK_RELAY_BATCH": "7"}, 7, []),
        (
            {"MOWDECK_OUTBOX_BATCH": "8"},
            8,
            [
                "MOWDECK_OUTBOX_BATCH is deprecated and read for one more release: "
                "set MOWDECK_RELAY_BATCH instead"
            ],
        ),
        (
            {"MOWDECK_OUTBOX_BATCH": "8", "MOWDECK_RELAY_BATCH": "9"},
            9,
            [
                "MOWDECK_OUTBOX_BATCH is set and ignored: MOWDECK_RELAY_BATCH replaces it, "
                "and is set too"
            ],
        ),
        (
            {"MOWDECK_OLD_URL": "http://x"},
            5,
            ["MOWDECK_OLD_URL is no longer read: set MOWDECK_OTHER_DATABASE=true instead"],
        ),
    ],
    ids=["neither", "new-name", "old-name-alone", "both-names", "retired"],
)
def test_an_old_name_is_read_for_one_release_with_a_warning(
    caplog: pytest.LogCaptureFixture, env: dict[str, str], batch: int, warnings: list[str]
) -> None:
    with caplog.at_level(logging.WARNING, logger="mowdeck.settings"):
        s = load_settings(Renamed, env)
    assert (s.relay_batch, s.relay_poll_seconds) == (batch, 1.0)
    assert [r.getMessage() for r in caplog.records] == warnings


def test_a_bad_value_under_the_old_name_names_the_old_variable() -> None:
    with pytest.raises(SettingsError, match=r"^MOWDECK_OUTBOX_BATCH: Expected `int` <= 100"):
        load_settings(Renamed, {"MOWDECK_OUTBOX_BATCH": "1000"})
