"""Merging the contracts' stream limits into a stream an operator configured."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest
from nats.js import api

from contracts.v1.subjects import COMMANDS, StreamSpec
from mowdeck.kit.bus import BusError, seed_urls
from mowdeck.kit.streams import merge, stream_config

SPEC = StreamSpec(name="S", subjects=("a.>",), duplicate_window_s=120, max_age_s=3600)


def _existing(**changes: object) -> api.StreamConfig:
    return dataclasses.replace(stream_config(SPEC), **changes)  # type: ignore[arg-type]


def test_a_new_stream_gets_the_configured_replicas() -> None:
    config = stream_config(COMMANDS, replicas=3)
    assert (config.num_replicas, config.storage, config.max_age) == (
        3,
        api.StorageType.FILE,
        24 * 3600,
    )


def test_a_stream_as_the_contracts_say_needs_nothing() -> None:
    plan = merge(_existing(), SPEC)
    assert (plan.changed, plan.kept) == ((), ())
    assert plan.config == stream_config(SPEC)


@pytest.mark.parametrize(
    ("existing", "field", "result", "changed"),
    [
        ({"max_age": 7200.0}, "max_age", 7200.0, False),
        ({"max_age": 60.0}, "max_age", 3600, True),
        ({"max_age": 0.0}, "max_age", 0.0, False),
        ({"duplicate_window": 600.0}, "duplicate_window", 600.0, False),
        ({"duplicate_window": 30.0}, "duplicate_window", 120, True),
        ({"duplicate_window": 0.0}, "duplicate_window", 120, True),
        ({"max_msgs_per_subject": 10}, "max_msgs_per_subject", -1, True),
    ],
    ids=[
        "longer-age-kept",
        "shorter-age-raised",
        "unlimited-age-kept",
        "longer-window-kept",
        "shorter-window-raised",
        "server-default-window-raised",
        "per-subject-cap-lifted-to-unlimited",
    ],
)
def test_limits_are_never_lowered(
    existing: dict[str, object], field: str, result: object, changed: bool
) -> None:
    plan = merge(_existing(**existing), SPEC)
    assert getattr(plan.config, field) == result
    assert bool(plan.changed) is changed
    assert bool(plan.kept) is (not changed)


def test_a_larger_per_subject_cap_of_the_contracts_lifts_a_smaller_one() -> None:
    spec = msgspec.structs.replace(SPEC, max_msgs_per_subject=100)
    assert merge(_existing(max_msgs_per_subject=10), spec).config.max_msgs_per_subject == 100
    kept = merge(_existing(max_msgs_per_subject=500), spec)
    assert (kept.config.max_msgs_per_subject, kept.changed) == (500, ())


def test_replicas_and_storage_stay_as_configured_and_are_reported() -> None:
    plan = merge(_existing(num_replicas=3, storage=api.StorageType.MEMORY), SPEC, replicas=1)
    assert (plan.config.num_replicas, plan.config.storage) == (3, api.StorageType.MEMORY)
    assert plan.changed == ()
    assert plan.kept == ("replicas 3 (configured here: 1)", "storage memory (contracts: file)")


def test_missing_subjects_are_added_and_extra_ones_kept() -> None:
    spec = StreamSpec(name="S", subjects=("a.>", "b.>"), duplicate_window_s=120, max_age_s=3600)
    plan = merge(_existing(subjects=["x.>", "a.>"]), spec)
    assert plan.config.subjects == ["x.>", "a.>", "b.>"]
    assert plan.changed == ("subject b.> added",)


def test_what_no_spec_names_is_left_as_it_is() -> None:
    plan = merge(_existing(max_bytes=1 << 30, discard=api.DiscardPolicy.NEW), SPEC)
    assert (plan.config.max_bytes, plan.config.discard) == (1 << 30, api.DiscardPolicy.NEW)


@pytest.mark.parametrize(
    ("url", "seeds"),
    [
        ("nats://a:4222", ["nats://a:4222"]),
        ("nats://a:4222,nats://b:4222", ["nats://a:4222", "nats://b:4222"]),
        (" nats://a:4222 , nats://b:4222 ,", ["nats://a:4222", "nats://b:4222"]),
    ],
    ids=["one", "two", "spaces-and-trailing-comma"],
)
def test_the_nats_url_is_a_list_of_seeds(url: str, seeds: list[str]) -> None:
    assert seed_urls(url) == seeds


def test_an_empty_nats_url_is_refused() -> None:
    with pytest.raises(BusError):
        seed_urls(" , ")
