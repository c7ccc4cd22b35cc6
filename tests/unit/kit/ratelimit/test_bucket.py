"""The token-bucket arithmetic: refill, burst, fractions, clocks that misbehave."""

from __future__ import annotations

import math

import pytest

from mowdeck.kit.ratelimit import Bucket, Limit, Verdict, refill, take, take_many

TEN_A_SECOND = Limit(rate=10, burst=5)


@pytest.mark.parametrize(
    ("bucket", "limit", "now", "left", "verdict"),
    [
        (None, TEN_A_SECOND, 100.0, Bucket(4, 100.0), Verdict(True)),
        (Bucket(1, 100.0), TEN_A_SECOND, 100.0, Bucket(0, 100.0), Verdict(True)),
        (Bucket(0, 100.0), TEN_A_SECOND, 100.0, Bucket(0, 100.0), Verdict(False, 0.1)),
        (Bucket(0, 100.0), TEN_A_SECOND, 100.05, Bucket(0.5, 100.05), Verdict(False, 0.05)),
        (Bucket(0, 100.0), TEN_A_SECOND, 100.1, Bucket(0, 100.1), Verdict(True)),
        (Bucket(0, 100.0), TEN_A_SECOND, 100.25, Bucket(1.5, 100.25), Verdict(True)),
        (Bucket(0, 100.0), TEN_A_SECOND, 103.0, Bucket(4, 103.0), Verdict(True)),
        (Bucket(0.2, 0.0), Limit(0.1, 3), 8.0, Bucket(0, 8.0), Verdict(True)),
        (Bucket(0.2, 0.0), Limit(0.1, 3), 7.0, Bucket(0.9, 7.0), Verdict(False, 1.0)),
        (Bucket(2, 100.0), TEN_A_SECOND, 99.0, Bucket(1, 100.0), Verdict(True)),
        (Bucket(0, 100.0), TEN_A_SECOND, 50.0, Bucket(0, 100.0), Verdict(False, 0.1)),
        (Bucket(0, 0.0), TEN_A_SECOND, 1e300, Bucket(4, 1e300), Verdict(True)),
        (Bucket(0, 0.0), Limit(1e6, 10_000_000), 1e300, Bucket(9_999_999, 1e300), Verdict(True)),
        (None, Limit(0, 1), 5.0, Bucket(1, 5.0), Verdict(True)),
    ],
    ids=[
        "a new key starts full and takes one",
        "the last token",
        "empty: refused until a tenth of a second has refilled one",
        "half a token refilled: refused, the other half in 0.05 s",
        "exactly one token refilled",
        "a token and a half refilled: one taken, half kept",
        "refilled to the burst, not beyond",
        "fractional rate: 0.2 + 0.8 makes a token",
        "fractional rate: 0.9 is not a token, 1 s for the rest",
        "a clock gone back refills nothing and keeps the bucket's time",
        "a clock gone far back: still refused, nothing refilled",
        "a huge idle gap fills the bucket, no more",
        "a huge gap at a huge rate stays finite",
        "rate 0 is off: always allowed",
    ],
)
def test_take(
    bucket: Bucket | None, limit: Limit, now: float, left: Bucket, verdict: Verdict
) -> None:
    after, answer = take(bucket, limit, now)
    assert after.at == left.at
    assert after.tokens == pytest.approx(left.tokens)
    assert answer.allowed == verdict.allowed
    assert answer.retry_after == pytest.approx(verdict.retry_after)


@pytest.mark.parametrize(
    ("bucket", "count", "left", "granted"),
    [
        (None, 3, 2.0, 3),
        (None, 9, 0.0, 5),
        (Bucket(2.5, 100.0), 4, 0.5, 2),
        (Bucket(0.5, 100.0), 4, 0.5, 0),
        (Bucket(0.9999999995, 100.0), 1, 0.0, 1),
        (Bucket(3, 100.0), 0, 3.0, 0),
    ],
    ids=[
        "fewer than the burst: all pass",
        "more than the burst: the burst passes",
        "whole tokens only: the half stays",
        "no whole token: none pass, nothing is taken",
        "a token short by less than the tolerance is a token",
        "no takes take nothing",
    ],
)
def test_take_many(bucket: Bucket | None, count: int, left: float, granted: int) -> None:
    after, passed = take_many(bucket, TEN_A_SECOND, 100.0, count)
    assert (after.tokens, passed) == (pytest.approx(left), granted)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 40], ids=lambda n: f"{n} at once")
@pytest.mark.parametrize(
    "bucket",
    [None, Bucket(0, 99.9), Bucket(2.2, 99.95), Bucket(4.9, 50.0)],
    ids=["new", "empty a tenth ago", "fractional", "long idle"],
)
def test_many_at_once_answer_as_one_after_another(bucket: Bucket | None, count: int) -> None:
    after, passed = take_many(bucket, TEN_A_SECOND, 100.0, count)
    one_by_one, answers = bucket, []
    for _ in range(count):
        one_by_one, verdict = take(one_by_one, TEN_A_SECOND, 100.0)
        answers.append(verdict.allowed)
    assert one_by_one is not None
    assert answers == [True] * passed + [False] * (count - passed)
    assert after.tokens == pytest.approx(one_by_one.tokens)


def test_a_burst_passes_whole_and_the_next_one_waits_for_the_rate() -> None:
    limit = Limit(rate=2, burst=600)
    bucket = None
    answers = []
    for _ in range(601):
        bucket, verdict = take(bucket, limit, 1000.0)
        answers.append(verdict.allowed)
    assert answers == [True] * 600 + [False]
    assert bucket is not None
    assert take(bucket, limit, 1000.49)[1].allowed is False
    assert take(bucket, limit, 1000.5)[1].allowed is True


def test_a_bucket_is_full_again_when_full_at_says_so() -> None:
    limit = Limit(rate=4, burst=10)
    bucket = Bucket(2, 50.0)
    assert bucket.full_at(limit) == 52.0
    assert refill(bucket, limit, 51.99).tokens < 10
    assert refill(bucket, limit, 52.0) == Bucket(10, 52.0)


@pytest.mark.parametrize(
    ("rate", "burst"),
    [(-1, 5), (math.nan, 5), (math.inf, 5), (1, 0.5), (1, math.inf), (1, math.nan)],
    ids=[
        "negative rate",
        "nan rate",
        "infinite rate",
        "burst below one",
        "infinite burst",
        "nan burst",
    ],
)
def test_a_limit_that_could_never_answer_sensibly_is_refused(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match=r"rate|burst"):
        Limit(rate, burst)
