"""The package's layout: private modules in dependency order, no module-level state.

Both are read from the source with `ast`, so an import that only runs for the type
checker (under `if TYPE_CHECKING:`) or inside a function counts as much as any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import actors

PACKAGE = Path(actors.__file__).parent
PRIVATE = sorted(path.stem for path in PACKAGE.glob("_*.py") if path.stem != "__init__")
INIT = "__init__"


def _imported_modules(tree: ast.Module) -> set[str]:
    """The `actors` modules a module imports, anywhere in it.

    `from actors import Name` needs the package's namespace, so it counts as importing
    `__init__` (which imports every private module); `from actors._x import Name` needs
    `_x` only.
    """
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "actors":
                    found.add(parts[1] if len(parts) > 1 else INIT)
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1:
                continue  # above the package: not one of its modules
            parts = node.module.split(".") if node.module else []
            if node.level == 0:
                if not parts or parts[0] != "actors":
                    continue
                parts = parts[1:]
            if parts:
                found.add(parts[0])
            else:  # `from actors import ...` or `from . import ...`
                for alias in node.names:
                    found.add(alias.name if alias.name in PRIVATE else INIT)
    return found


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name in [INIT, *PRIVATE]:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        graph[name] = (_imported_modules(tree) & {INIT, *PRIVATE}) - {name}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as [a, b, ..., a], or None if it has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for successor in sorted(graph.get(node, ())):
            cycle = visit(successor)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle is not None:
            return cycle
    return None


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
    ids=["chain", "pair", "cycle-behind-a-chain"],
)
def test_find_cycle(graph: dict[str, set[str]], expected: list[str] | None) -> None:
    assert _find_cycle(graph) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from actors._inbox import TwoLaneInbox", {"_inbox"}),
        ("from ._inbox import TwoLaneInbox", {"_inbox"}),
        ("from . import _inbox", {"_inbox"}),
        ("from actors import Dispatcher", {INIT}),
        ("import actors._inbox", {"_inbox"}),
        ("import actors", {INIT}),
        ("from actors import _inbox", {"_inbox"}),
        ("if TYPE_CHECKING:\n    from actors._actor import DispatcherActor", {"_actor"}),
        ("def f():\n    from actors._actor import DispatcherActor", {"_actor"}),
        ("import pykka\nfrom pykka._actor import ActorInbox", set()),
    ],
    ids=[
        "absolute",
        "relative",
        "relative-module",
        "package",
        "plain-import",
        "the-package",
        "a-module-of-the-package",
        "type-checking",
        "in-a-function",
        "other-package",
    ],
)
def test_imports_are_found(source: str, expected: set[str]) -> None:
    assert _imported_modules(ast.parse(source)) == expected


def test_private_modules_import_in_no_circle() -> None:
    graph = _import_graph()
    # The package imports each of its private modules, directly or through another one.
    reached, todo = set(), [INIT]
    while todo:
        node = todo.pop()
        if node not in reached:
            reached.add(node)
            todo.extend(graph[node])
    assert reached == {INIT, *PRIVATE}
    assert _find_cycle(graph) is None


_MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_MUTABLE_FACTORIES = {
    "count",
    "cycle",
    "defaultdict",
    "deque",
    "dict",
    "list",
    "set",
    "Counter",
    "OrderedDict",
    "WeakKeyDictionary",
    "WeakSet",
    "WeakValueDictionary",
    "Condition",
    "Event",
    "Lock",
    "RLock",
    "Semaphore",
    "allocate_lock",
    "Random",
    "CollectorRegistry",
}


def _module_level_state(tree: ast.Module) -> list[str]:
    """Module-level names bound to something mutable (`__all__` aside)."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = [target.id for target in targets if isinstance(target, ast.Name)]
        if names == ["__all__"]:
            continue
        if isinstance(value, _MUTABLE_DISPLAYS):
            found.append(f"{names} = {ast.unparse(value)}")
        elif isinstance(value, ast.Call):
            func = value.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _MUTABLE_FACTORIES:
                found.append(f"{names} = {ast.unparse(value)}")
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("_names = itertools.count(1)", ["['_names'] = itertools.count(1)"]),
        ("_seen: dict[str, int] = {}", ["['_seen'] = {}"]),
        ("_lock = threading.Lock()", ["['_lock'] = threading.Lock()"]),
        ("_BUCKETS: Final = (0.1, 1.0)", []),
        ('__all__ = ["Dispatcher"]', []),
        ("def f():\n    cache = {}", []),
    ],
    ids=["counter", "dict", "lock", "tuple", "dunder-all", "local"],
)
def test_module_level_state_is_found(source: str, expected: list[str]) -> None:
    assert _module_level_state(ast.parse(source)) == expected


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_no_module_level_mutable_state(path: Path) -> None:
    # Two dispatchers (or two services) in one process must not share anything.
    assert _module_level_state(ast.parse(path.read_text(encoding="utf-8"))) == []
