"""Runs an OpenFGA test file (``model.fga.yaml``) through the in-process evaluator.

The file is kept in JSON syntax (valid YAML, read as-is by ``fga model test``) so this
runner needs no YAML parser.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from mowdeck.authz._local import LocalAuthorizer
from mowdeck.authz._memory import InMemoryTupleStore
from mowdeck.authz._model import AuthorizationModel, load_model
from mowdeck.authz._ports import TupleStore
from mowdeck.authz._tuples import Tuple

__all__ = [
    "ModelTestReport",
    "StoreFactory",
    "default_test_file",
    "load_test_file",
    "main",
    "memory_store",
    "run_test_file",
]

StoreFactory = Callable[[], Awaitable[TupleStore]]


async def memory_store() -> TupleStore:
    """A fresh in-memory store (the default for each test of a file)."""
    return InMemoryTupleStore()


@dataclass
class ModelTestReport:
    """What a run found: assertions counted and the ones that failed, in words."""

    checks: int = 0
    list_objects: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every assertion held (and there was at least one)."""
        return not self.failures and (self.checks + self.list_objects) > 0


def default_test_file() -> Path:
    """The model's own test file, ``mowdeck/authz/model.fga.yaml``."""
    return Path(str(resources.files("mowdeck.authz").joinpath("model.fga.yaml")))


def load_test_file(path: Path) -> dict[str, Any]:
    """The test file's document."""
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _tuples(entries: list[dict[str, Any]] | None) -> list[Tuple]:
    for entry in entries or []:
        if entry.get("condition"):
            raise ValueError("conditional tuples are not supported by the local evaluator")
    return [Tuple(e["user"], e["relation"], e["object"]) for e in entries or []]


async def _run_test(
    test: dict[str, Any], base: list[Tuple], model: AuthorizationModel, store: TupleStore
) -> ModelTestReport:
    outcome = ModelTestReport()
    authorizer = LocalAuthorizer(store, model)
    await authorizer.write([*base, *_tuples(test.get("tuples"))])
    name = test.get("name", "?")
    for case in test.get("check") or []:
        for relation, expected in case["assertions"].items():
            outcome.checks += 1
            got = await authorizer.check(case["user"], relation, case["object"])
            if got != expected:
                outcome.failures.append(
                    f"{name}: check({case['user']}, {relation}, {case['object']}) "
                    f"expected {expected}, got {got}"
                )
    for case in test.get("list_objects") or []:
        for relation, expected in case["assertions"].items():
            outcome.list_objects += 1
            found = await authorizer.list_objects(case["user"], relation, case["type"])
            if found != set(expected):
                outcome.failures.append(
                    f"{name}: list_objects({case['user']}, {relation}, {case['type']}) "
                    f"expected {sorted(expected)}, got {sorted(found)}"
                )
    return outcome


async def run_test_file(
    path: Path | None = None,
    model: AuthorizationModel | None = None,
    store_factory: StoreFactory = memory_store,
) -> ModelTestReport:
    """Run every test of the file, each on a fresh store from ``store_factory``."""
    document = load_test_file(path or default_test_file())
    model = model if model is not None else load_model()
    base = _tuples(document.get("tuples"))
    total = ModelTestReport()
    for test in document.get("tests") or []:
        outcome = await _run_test(test, base, model, await store_factory())
        total.checks += outcome.checks
        total.list_objects += outcome.list_objects
        total.failures.extend(outcome.failures)
    return total


def main(argv: list[str] | None = None) -> int:
    """``python -m mowdeck.authz.fgatest [FILE] [--model model.json]``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", nargs="?", type=Path, default=None)
    parser.add_argument("--model", type=Path, default=None, help="model JSON (fga model transform)")
    args = parser.parse_args(argv)
    model = AuthorizationModel.from_json(args.model.read_text()) if args.model else None
    outcome = asyncio.run(run_test_file(args.file, model))
    for failure in outcome.failures:
        print(f"FAIL {failure}")
    print(
        f"checks {outcome.checks}, list_objects {outcome.list_objects}, "
        f"failed {len(outcome.failures)}"
    )
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
