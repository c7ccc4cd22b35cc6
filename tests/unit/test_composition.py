"""Composition that only composes: every service's root opens, builds, starts, and no more.

Each service has ``service.py`` (the root: ``ServiceShell`` with a short ``_start``) and
``parts.py`` (a pure ``build`` returning a frozen dataclass of parts, and the ``steps``
they start in). Both stay small enough to read at once; no attribute of a service waits
as ``None`` to be filled by the start, and no ``assert ... is not None`` stands in for a
part that may not be there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2] / "mowdeck"
SERVICES = ("fleet", "gateway", "telemetry", "notifications", "realtime")
MAX_LINES = 200
MAX_FUNCTION_LINES = 60
COMPOSITION = [ROOT / s / m for s in SERVICES for m in ("service.py", "parts.py")]


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@pytest.mark.parametrize("path", COMPOSITION, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_composition_module_is_short_and_so_are_its_functions(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < MAX_LINES, f"{path.name} has {lines} lines"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"  # type: ignore[operator]
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[operator]
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


@pytest.mark.parametrize("path", COMPOSITION, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_part_is_asserted_into_being(path: Path) -> None:
    found = [
        ast.unparse(node)
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Assert)
        and isinstance(node.test, ast.Compare)
        and any(isinstance(op, ast.IsNot) for op in node.test.ops)
    ]
    assert not found


@pytest.mark.parametrize("service", SERVICES)
def test_no_service_attribute_waits_to_be_filled_by_the_start(service: str) -> None:
    # ``self.x: T | None = None`` in a service's constructor: a part the start fills in.
    waiting = [
        ast.unparse(node)
        for node in ast.walk(_tree(ROOT / service / "service.py"))
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Attribute)
        and isinstance(node.value, ast.Constant)
        and node.value.value is None
    ]
    assert not waiting


@pytest.mark.parametrize("service", SERVICES)
def test_the_parts_are_built_by_a_pure_function(service: str) -> None:
    # ``build`` constructs and wires: nothing in it is awaited (nothing starts, no I/O).
    tree = _tree(ROOT / service / "parts.py")
    builds = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "build"]
    assert builds, f"{service}/parts.py has no plain (not async) build()"
    awaited = [
        ast.unparse(node)
        for node in ast.walk(builds[0])
        if isinstance(node, ast.Await) and not _inside_nested_function(builds[0], node)
    ]
    assert not awaited


def _inside_nested_function(outer: ast.FunctionDef, target: ast.AST) -> bool:
    # An await in a coroutine ``build`` defines (a callback) runs later, not in build.
    return any(
        node is not outer
        and isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef)
        and any(child is target for child in ast.walk(node))
        for node in ast.walk(outer)
    )
