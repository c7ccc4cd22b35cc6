"""Page parameters and cursors: what a list endpoint reads, and the 400 naming a bad one."""

from __future__ import annotations

import uuid

import pytest

from mowdeck.kit.http import Problem
from mowdeck.kit.paging import cursor_of, page_params, read_cursor, split_page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, (10, None)),
        ({"limit": "3"}, (3, None)),
        ({"limit": "50", "after": "abc"}, (50, "abc")),
        ({"before": "old"}, (10, "old")),
        ({"before": "old", "after": "new"}, (10, "new")),
        ({"unknown": "x"}, (10, None)),
    ],
    ids=["defaults", "limit", "both", "former-name", "after-wins", "unknown-ignored"],
)
def test_page_params(query: dict[str, str], expected: tuple[int, str | None]) -> None:
    got = page_params(query, default=10, maximum=50, cursor_names=("before",))
    assert (got.limit, got.after) == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": ""}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "51"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "٣"}, "limit"),  # a digit, but not an ASCII one
        ({"after": ""}, "after"),
    ],
    ids=["empty-limit", "zero", "over", "negative", "non-ascii", "empty-after"],
)
def test_a_bad_page_parameter_is_a_400_naming_it(query: dict[str, str], field: str) -> None:
    with pytest.raises(Problem) as err:
        page_params(query, default=10, maximum=50)
    assert (err.value.status, err.value.extra["field"]) == (400, field)


def test_a_cursor_round_trips_and_a_foreign_one_is_refused() -> None:
    mower = uuid.uuid4()
    assert read_cursor(cursor_of(["a", mower]), tuple[str, uuid.UUID]) == ("a", mower)
    for foreign in ["!!", "e30", cursor_of(["a", "not-an-id"])]:
        with pytest.raises(Problem) as err:
            read_cursor(foreign, tuple[str, uuid.UUID])
        assert err.value.extra["field"] == "after"


def test_split_page_says_whether_more_follow() -> None:
    assert split_page([1, 2, 3], 2) == ([1, 2], True)
    assert split_page([1, 2], 2) == ([1, 2], False)
