"""No live objects at module level: what a service holds, its composition owns.

Every module of the packages below is read with ``ast``; an assignment at module level,
or a class attribute (not a dataclass's or a Struct's field default), whose value is a
mutable container or a live object (a task set, a session, a weak dictionary, a lock, a
metric, a registry) fails the test. Two instances of a service in one process must share
nothing (the tests', the demo's). Constants are fine: names in capitals, compiled
regexes, frozen values, msgspec encoders and decoders. What is left is listed with its
reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGES = (
    "gateway",
    "fleet",
    "realtime",
    "telemetry",
    "notifications",
    "kit",
    "devices",
    "authn",
    "authz",
    "demo",
    "commands",
)

# Calls that build something that holds or changes state.
LIVE = frozenset(
    {
        "BackgroundTasks",
        "ClientSession",
        "CollectorRegistry",
        "Condition",
        "Counter",
        "Event",
        "Gauge",
        "Histogram",
        "Lock",
        "OrderedDict",
        "Queue",
        "Semaphore",
        "TCPConnector",
        "WeakKeyDictionary",
        "WeakSet",
        "WeakValueDictionary",
        "defaultdict",
        "deque",
        "dict",
        "list",
        "set",
    }
)
MUTABLE_DISPLAYS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
# Found and kept, with the reason: "path:name".
KEPT = {
    "mowdeck/kit/logging.py:_message_vars": "the context variables of the message keys, made once",
    "mowdeck/notifications/rules/quiet.py:zone": "IANA zones by name: immutable, bounded (512)",
    "mowdeck/notifications/rules/templates.py:default_catalogue": (
        "the message templates shipped in the package, read once"
    ),
    "mowdeck/devices/errors.py:_automower": (
        "the vendor's error texts shipped in the package, read once"
    ),
    "mowdeck/notifications/delivery/channels/http.py:_timeout": (
        "aiohttp timeouts by their seconds: immutable values, bounded (64)"
    ),
}
# A memo at module level is state too: every instance in the process shares what it holds.
MEMOS = frozenset({"cache", "lru_cache", "functools.cache", "functools.lru_cache"})


def _holds_state(value: ast.expr) -> bool:
    if isinstance(value, MUTABLE_DISPLAYS):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in LIVE
    return False


def _is_record(cls: ast.ClassDef) -> bool:
    # A dataclass's or a Struct's annotated class attributes are per-instance defaults.
    if any("dataclass" in ast.unparse(d) for d in cls.decorator_list):
        return True
    return any(ast.unparse(b).endswith(("Struct", "Settings")) for b in cls.bases)


def _constant(name: str) -> bool:
    return name.lstrip("_").isupper()


def _assignments(body: list[ast.stmt], cls: ast.ClassDef | None) -> Iterator[tuple[str, ast.expr]]:
    for node in body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield ast.unparse(target), node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            field = cls is not None and _is_record(cls)
            if field and "ClassVar" not in ast.unparse(node.annotation):
                continue
            yield ast.unparse(node.target), node.value


def _memoised(node: ast.stmt) -> bool:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for decorator in node.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        if ast.unparse(call) in MEMOS:
            return True
    return False


def found_state(source: str, where: str) -> Iterator[str]:
    """``where:name`` of each module-level or class-level assignment that holds state, and
    of each function memoised at module level."""
    tree = ast.parse(source)
    for node in tree.body:
        if _memoised(node):
            yield f"{where}:{node.name}"  # type: ignore[attr-defined]
    scopes: list[tuple[list[ast.stmt], ast.ClassDef | None]] = [(tree.body, None)]
    scopes += [(n.body, n) for n in tree.body if isinstance(n, ast.ClassDef)]
    for body, cls in scopes:
        for name, value in _assignments(body, cls):
            if name != "__all__" and not _constant(name) and _holds_state(value):
                owner = f"{cls.name}." if cls is not None else ""
                yield f"{where}:{owner}{name}"


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("_background = BackgroundTasks()\n", ["_background"]),
        ("_seen: set[str] = set()\n", ["_seen"]),
        ("class A:\n    _by_loop: dict[int, int] = weakref.WeakKeyDictionary()\n", ["A._by_loop"]),
        ("class A:\n    cache = {}\n", ["A.cache"]),
        ("@dataclass\nclass A:\n    items: list[int] = field(default_factory=list)\n", []),
        ("class S(msgspec.Struct):\n    origins: list[str] = []\n", []),
        ("TABLE = {'s': 1}\n_WORD = re.compile('x')\nlog = structlog.get_logger()\n", []),
        ("@functools.lru_cache(maxsize=8)\ndef keys(s):\n    return s\n", ["keys"]),
    ],
    ids=[
        "task-set",
        "set",
        "class-weak-dict",
        "class-dict",
        "dataclass-field",
        "struct-field",
        "constants",
        "memo",
    ],
)
def test_the_check(source: str, found: list[str]) -> None:
    assert [f.rpartition(":")[2] for f in found_state(source, "probe.py")] == found


def _all_found() -> list[str]:
    return [
        place
        for package in PACKAGES
        for path in sorted((ROOT / "mowdeck" / package).rglob("*.py"))
        for place in found_state(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def test_no_module_level_state_in_the_services_and_the_kit() -> None:
    assert [place for place in _all_found() if place not in KEPT] == []


def test_every_kept_place_is_still_there() -> None:
    assert sorted(set(KEPT) - set(_all_found())) == []
