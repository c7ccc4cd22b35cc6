"""Query times: parsed one way, held to the range a query can mean."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mowdeck.kit.times import (
    EARLIEST,
    FUTURE_ALLOWANCE,
    TimeRefusal,
    check_time,
    parse_time,
    query_range,
)

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-01T00:00:00Z", datetime(2026, 5, 1, tzinfo=UTC)),
        ("2026-05-01T02:00:00+02:00", datetime(2026, 5, 1, tzinfo=UTC)),
        ("2026-05-01T00:00:00.5-01:00", datetime(2026, 5, 1, 1, 0, 0, 500000, tzinfo=UTC)),
    ],
    ids=["zulu", "offset-east", "fraction-offset-west"],
)
def test_parses_to_utc(text: str, expected: datetime) -> None:
    value = parse_time("from", text)
    assert value == expected
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "out_of_range"),
    [
        ("yesterday", False),
        ("2026-05-01T00:00:00", False),  # no offset: the server's zone is no answer
        ("", False),
        ("0001-01-01T00:00:00+01:00", True),  # before the first representable instant
    ],
    ids=["words", "naive", "empty", "before-year-one"],
)
def test_refuses_what_is_no_time(text: str, out_of_range: bool) -> None:
    with pytest.raises(TimeRefusal) as refused:
        parse_time("from", text)
    assert refused.value.out_of_range is out_of_range
    assert "`from`" in refused.value.detail


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (EARLIEST, True),
        (EARLIEST - timedelta(microseconds=1), False),
        (NOW, True),
        (NOW + FUTURE_ALLOWANCE, True),
        (NOW + FUTURE_ALLOWANCE + timedelta(microseconds=1), False),
        (datetime.max.replace(tzinfo=UTC), False),  # asyncpg sends it as `infinity`
        (datetime.min.replace(tzinfo=UTC), False),  # and this as `-infinity`
    ],
    ids=["earliest", "before-earliest", "now", "last-allowed", "past-allowance", "max", "min"],
)
def test_range(value: datetime, ok: bool) -> None:
    if ok:
        assert check_time("to", value, NOW) == value
    else:
        with pytest.raises(TimeRefusal) as refused:
            check_time("to", value, NOW)
        assert refused.value.out_of_range
        assert "`to`" in refused.value.detail


def test_a_query_range_names_the_parameter_it_refuses() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert query_range({}, now) == (None, None)
    assert query_range({"from": "2026-05-01T00:00:00Z"}, now) == (
        datetime(2026, 5, 1, tzinfo=UTC),
        None,
    )
    with pytest.raises(TimeRefusal) as bad:
        query_range({"from": "2026-05-01T00:00:00Z", "to": "yesterday"}, now)
    assert (bad.value.field, bad.value.out_of_range) == ("to", False)
    with pytest.raises(TimeRefusal) as early:
        query_range({"from": "1999-01-01T00:00:00Z"}, now)
    assert (early.value.field, early.value.out_of_range) == ("from", True)
    with pytest.raises(TimeRefusal) as pair:
        query_range({"from": "2026-05-02T00:00:00Z", "to": "2026-05-01T00:00:00Z"}, now)
    assert (pair.value.field, pair.value.detail) == ("to", "`to` must be after `from`")
