"""Adversarial payloads drawn by Hypothesis, in batches a running system is fed with.

A system under test runs on the test's event loop, so Hypothesis cannot drive each case
through ``@given`` there: ``draw`` runs a generate-only ``@given`` that collects a batch
(seeded, so a failing batch is drawn again by the same seed), and the test sends it.
``MOWDECK_FUZZ_EXAMPLES`` raises the batch sizes for longer local runs (CI keeps the
defaults small so every fuzzing module adds seconds, not minutes).
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any, TypeVar

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

__all__ = ["draw", "examples", "json_junk", "junk", "nested", "unicode_edges"]

T = TypeVar("T")


def examples(default: int) -> int:
    """How many examples a batch has: ``default``, or ``MOWDECK_FUZZ_EXAMPLES`` when larger."""
    return max(default, int(os.environ.get("MOWDECK_FUZZ_EXAMPLES", "0") or 0))


def draw(strategy: st.SearchStrategy[T], count: int, *, at: int = 29) -> list[T]:
    """``count`` examples of ``strategy`` (at most; Hypothesis may stop early), seeded ``at``."""
    found: list[T] = []

    @seed(at)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def collect(value: T) -> None:
        found.append(value)

    collect()
    return found


# Strings where decoders and databases disagree: NUL, a lone surrogate escaped in JSON,
# right-to-left and zero-width marks, a character outside the BMP, combining marks, a BOM.
unicode_edges = st.sampled_from(
    [
        "\x00",
        "\\ud800",
        "\u202e\u200b",
        "\U0001f9a0" * 40,
        "e\u0301" * 30,
        "\ufeff",
        "",
        "a" * 5000,
    ]
)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    unicode_edges,
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


def nested(depth: int) -> bytes:
    """A JSON array nested ``depth`` deep: decoders that recurse fail on it."""
    return b"[" * depth + b"]" * depth


def _with(base: dict[str, Any], key: str, value: Any) -> bytes:
    out = dict(base)
    out[key] = value
    return json.dumps(out).encode().replace(b'"\\\\ud800"', b'"\\ud800"')


def json_junk(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """``valid`` (a JSON object that decodes) with one field changed, dropped or added."""
    keys = sorted(valid)
    changed = st.builds(
        lambda k, v: _with(valid, k, v), st.sampled_from(keys), _json | unicode_edges
    )
    dropped = st.sampled_from(keys).map(
        lambda k: json.dumps({x: y for x, y in valid.items() if x != k}).encode()
    )
    naive = st.sampled_from([k for k in keys if k.endswith("_at")] or keys).map(
        lambda k: _with(valid, k, "2026-01-01T00:00:00")
    )
    wrong_id = st.sampled_from([k for k in keys if k.endswith("_id")] or keys).map(
        lambda k: _with(valid, k, str(uuid.UUID(int=1))[:-1])
    )
    return st.one_of(changed, dropped, naive, wrong_id)


def junk(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """Bytes a consumer of ``valid``'s kind must refuse: noise, wrong JSON, near misses."""
    return st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        _json.map(lambda v: json.dumps(v).encode()),
        st.integers(100, 5000).map(nested),
        st.just(b"\xff\xfe" + json.dumps(valid).encode()),
        st.just(json.dumps(valid).encode()[:-1]),
        json_junk(valid),
    )
