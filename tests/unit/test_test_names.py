"""Every unit test is found from its module's name, and every module's tests from the test's.

``tests/unit/<path>/test_<module>[_<aspect>].py`` tests ``<path>/<module>.py`` of the
source (``mowdeck/<path>`` for Mowdeck's packages; ``actors``, ``contracts`` and
``simulator`` at the root): the module itself, its private twin ``_<module>.py``, or the
package ``<module>/``; ``test_package[_<aspect>].py`` tests the folder's ``__init__.py``.
The few tests of the project as a whole sit at ``tests/unit/`` and are listed here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
TOP_LEVEL_PACKAGES = ("actors", "contracts", "simulator")
PROJECT_CHECKS = {
    "test_architecture.py": "docs/architecture.md's layout against the packages",
    "test_compose.py": "compose.yaml against the commands and settings",
    "test_docs.py": "the performance pages and their citations",
    "test_composition.py": "every service composes in the same small shape",
    "test_import_boundaries.py": "which package may import which",
    "test_kubernetes.py": "deploy/kubernetes rendered and validated",
    "test_module_state.py": "no module-level mutable state",
    "test_prometheus_rules.py": "deploy/prometheus/'s rules against promtool and the runbooks",
    "test_simulated_geofences.py": "the simulator's mowers through Notifications' geofence rules",
    "test_test_names.py": "this rule",
}
# Tests of the tests' own support code.
SUPPORT = UNIT / "support"


def _source_dir(test_dir: Path) -> Path:
    parts = test_dir.relative_to(UNIT).parts
    if parts and parts[0] in TOP_LEVEL_PACKAGES:
        return ROOT.joinpath(*parts)
    return ROOT.joinpath("mowdeck", *parts)


def _tests(source: Path, name: str) -> bool:
    """Whether some ``_``-joined prefix of ``name`` names a module of ``source``."""
    words = name.split("_")
    for end in range(len(words), 0, -1):
        module = "_".join(words[:end])
        if module == "package" and (source / "__init__.py").exists():
            return True
        candidates = (source / f"{module}.py", source / f"_{module}.py", source / module)
        if any(c.exists() for c in candidates):
            return True
    return False


def _unit_tests() -> list[Path]:
    return sorted(p for p in UNIT.rglob("test_*.py") if SUPPORT not in p.parents)


def test_a_module_s_tests_are_named_after_it() -> None:
    stray = []
    for test in _unit_tests():
        if test.parent == UNIT:
            if test.name not in PROJECT_CHECKS:
                stray.append(f"{test.relative_to(ROOT)}: a project check not listed here")
            continue
        if not _tests(_source_dir(test.parent), test.stem.removeprefix("test_")):
            source = _source_dir(test.parent).relative_to(ROOT)
            stray.append(f"{test.relative_to(ROOT)}: names no module of {source}/")
    assert stray == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [("http_json_depth", True), ("http", True), ("nothing_here", False), ("package_x", True)],
    ids=["aspect", "module", "none", "package"],
)
def test_the_rule_itself(name: str, expected: bool) -> None:
    assert _tests(ROOT / "mowdeck" / "kit", name) is expected
