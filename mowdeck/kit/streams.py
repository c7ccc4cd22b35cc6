"""Stream limits as applied to a server: the contracts' minimum, merged into what exists.

Applying the stream definitions never lowers what an operator configured: an existing
stream keeps its replicas, storage, retention and every larger limit; only what is
missing (a subject, a limit below the contracts') is added. ``merge`` is pure and says
what it left alone.
"""

from __future__ import annotations

import dataclasses

import msgspec
from nats.js import api

from contracts.v1.subjects import StreamSpec

__all__ = ["Applied", "StreamPlan", "merge", "stream_config"]


def stream_config(spec: StreamSpec, *, replicas: int = 1) -> api.StreamConfig:
    """The JetStream configuration of a stream spec, for a new stream."""
    return api.StreamConfig(
        name=spec.name,
        subjects=list(spec.subjects),
        duplicate_window=spec.duplicate_window_s,
        max_age=spec.max_age_s,
        max_msgs_per_subject=spec.max_msgs_per_subject,
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.LIMITS,
        num_replicas=replicas,
    )


class StreamPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What applying a spec to an existing stream changes, and what it leaves alone."""

    config: api.StreamConfig
    changed: tuple[str, ...]
    kept: tuple[str, ...]


class Applied(msgspec.Struct, frozen=True, kw_only=True):
    """What applying one stream definition did on the server."""

    stream: str
    action: str  # created | updated | unchanged
    changed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


def _unlimited(value: float | None) -> bool:
    # JetStream reads 0 and -1 (and an absent value) as "no limit".
    return value is None or value <= 0


def _larger(existing: float | None, wanted: float) -> float | None:
    """The larger of two limits, where "no limit" is the largest."""
    if _unlimited(existing):
        return existing
    if _unlimited(wanted):
        return wanted
    assert existing is not None  # narrowed by _unlimited
    return max(existing, wanted)


def merge(existing: api.StreamConfig, spec: StreamSpec, *, replicas: int = 1) -> StreamPlan:
    """Merge ``spec`` into an existing stream's configuration without lowering anything."""
    changed: list[str] = []
    kept: list[str] = []
    subjects = list(existing.subjects or [])
    for subject in spec.subjects:
        if subject not in subjects:
            subjects.append(subject)
            changed.append(f"subject {subject} added")
    limits = {
        "max_age": (existing.max_age, spec.max_age_s),
        "duplicate_window": (existing.duplicate_window, spec.duplicate_window_s),
        "max_msgs_per_subject": (existing.max_msgs_per_subject, spec.max_msgs_per_subject),
    }
    merged: dict[str, object] = {"subjects": subjects}
    for name, (have, want) in limits.items():
        # A duplicate window of 0 is the server's default (2 minutes), not "no window".
        value = max(have or 0, want) if name == "duplicate_window" else _larger(have, want)
        merged[name] = value
        if value != have:
            changed.append(f"{name} {_show(have)} -> {_show(value)}")
        elif have != want:
            kept.append(f"{name} {_show(have)} (contracts: {_show(want)})")
    if existing.num_replicas is not None and existing.num_replicas != replicas:
        kept.append(f"replicas {existing.num_replicas} (configured here: {replicas})")
    if existing.storage is not None and existing.storage != api.StorageType.FILE:
        kept.append(f"storage {existing.storage.value} (contracts: file)")
    if existing.retention is not None and existing.retention != api.RetentionPolicy.LIMITS:
        kept.append(f"retention {existing.retention.value} (contracts: limits)")
    config = dataclasses.replace(existing, **merged)  # type: ignore[arg-type]
    return StreamPlan(config=config, changed=tuple(changed), kept=tuple(kept))


def _show(value: float | None) -> str:
    if _unlimited(value):
        return "unlimited"
    assert value is not None  # narrowed by _unlimited
    return str(int(value)) if float(value).is_integer() else str(value)
