"""Services do not import each other: they meet on the bus, over HTTP and in shared packages.

Every module of the project is read with ``ast`` (imports inside functions and under
``TYPE_CHECKING`` count too: they couple as much) and each import of a project package
is held to the table below: a service imports itself and shared packages; a shared
package imports no service; only the composing places import services. A package the
table does not name fails the test until someone says what it is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

SERVICE = "service"
SHARED = "shared"
COMPOSING = "composing"

# What each project package is, and why. Keys are the importable names: the top-level
# packages, and each package or module directly under ``mowdeck``.
LAYERS: dict[str, tuple[str, str]] = {
    "mowdeck.fleet": (SERVICE, "the mower registry and command issuing"),
    "mowdeck.gateway": (SERVICE, "device links, one controller per mower"),
    "mowdeck.telemetry": (SERVICE, "the read models of states, history and tracks"),
    "mowdeck.notifications": (SERVICE, "rules, watches and deliveries"),
    "mowdeck.realtime": (SERVICE, "live streams to browsers"),
    "mowdeck": (SHARED, "the package's root (empty)"),
    "mowdeck.kit": (SHARED, "mechanisms every service needs (bus, consumers, HTTP, settings)"),
    "mowdeck.authn": (SHARED, "the bearer tokens every API verifies"),
    "mowdeck.authz": (SHARED, "the authorization model every API asks"),
    "mowdeck.devices": (
        SHARED,
        "what Fleet and the gateway both know of devices: connection kinds, endpoint policy",
    ),
    "mowdeck.errors": (SHARED, "the root of every package's errors"),
    "mowdeck.dashboards": (SHARED, "Grafana dashboards of every service's metrics, as code"),
    "mowdeck.commands": (
        COMPOSING,
        "admin commands that set up what services use and may not create themselves: "
        "`mowdeck streams` creates Realtime's ticket bucket (with Realtime's settings) "
        "beside the streams and the deny-list's bucket",
    ),
    "mowdeck.cli": (COMPOSING, "the `mowdeck` command, a subcommand per service"),
    "mowdeck.demo": (COMPOSING, "every service in one process"),
    "contracts": (SHARED, "the v1 messages every service speaks"),
    "actors": (SHARED, "the actor runtime services run their per-mower actors on"),
    "simulator": (SHARED, "the simulated device and its protocol, spoken by the gateway"),
}
# Imports that cross a boundary for now, each with its reason: (file, imported entry).
CROSSINGS_ALLOWED: dict[tuple[str, str], str] = {}
SOURCES = ("mowdeck", "contracts", "actors", "simulator")
PARTS = ("mowdeck",)  # roots whose packages are each an entry of LAYERS


@dataclass(frozen=True)
class Import:
    """One import of a project package by a project module."""

    path: str
    line: int
    importer: str  # the importing module's entry of LAYERS
    imported: str  # the imported module's entry of LAYERS


def owner(module: str) -> str | None:
    """The entry of LAYERS a dotted module name belongs to (None: not the project's)."""
    parts = module.split(".")
    if parts[0] not in SOURCES:
        return None
    if parts[0] in PARTS and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def module_name(path: Path) -> str:
    """The dotted name of a source file under ROOT."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """Every module a file imports, anywhere in it, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module is not None
                yield node.lineno, node.module
                continue
            # A relative import: resolved against the importing module's package.
            package = module.split(".")
            if not is_package:
                package.pop()
            base = package[: len(package) - (node.level - 1)]
            yield node.lineno, ".".join([*base, *([node.module] if node.module else [])])


def project_imports() -> Iterator[Import]:
    """Every import of a project package by a project module."""
    for source in SOURCES:
        for path in sorted((ROOT / source).rglob("*.py")):
            module = module_name(path)
            importer = owner(module)
            assert importer is not None
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, name in imported_modules(tree, module, path.name == "__init__.py"):
                imported = owner(name)
                if imported is not None:
                    yield Import(str(path.relative_to(ROOT)), line, importer, imported)


def refusal(found: Import) -> str | None:
    """Why ``found`` crosses a boundary, or None when it may."""
    importer_kind = LAYERS[found.importer][0]
    imported_kind = LAYERS[found.imported][0]
    if found.importer == found.imported or importer_kind == COMPOSING:
        return None
    if imported_kind == SERVICE:
        return f"a {importer_kind} package imports the service {found.imported}"
    if imported_kind == COMPOSING:
        return f"a {importer_kind} package imports the composing place {found.imported}"
    return None


ALL = list(project_imports())


def test_every_package_is_in_the_table() -> None:
    unknown = sorted({i.importer for i in ALL} - set(LAYERS))
    assert unknown == [], f"say in LAYERS what these are: {unknown}"


def test_the_walk_finds_imports_inside_functions() -> None:
    # An import inside a function couples as much as one at the top of the file.
    tree = ast.parse("def f():\n    from mowdeck.fleet import x\n")
    assert list(imported_modules(tree, "mowdeck.kit.x", is_package=False)) == [(2, "mowdeck.fleet")]


@pytest.mark.parametrize(
    ("module", "is_package", "source", "expected"),
    [
        ("mowdeck.kit.bus", False, "from . import wire", "mowdeck.kit"),
        ("mowdeck.kit.bus", False, "from ..fleet import rules", "mowdeck.fleet"),
        ("mowdeck.kit", True, "from .wire import x", "mowdeck.kit.wire"),
    ],
    ids=["sibling", "parent", "package-init"],
)
def test_relative_imports_resolve_against_the_package(
    module: str, is_package: bool, source: str, expected: str
) -> None:
    tree = ast.parse(source)
    assert [name for _, name in imported_modules(tree, module, is_package)] == [expected]


@pytest.mark.parametrize(
    ("importer", "imported", "crosses"),
    [
        ("mowdeck.fleet", "mowdeck.gateway", True),
        ("mowdeck.realtime", "mowdeck.telemetry", True),
        ("mowdeck.kit", "mowdeck.fleet", True),
        ("mowdeck.fleet", "mowdeck.commands", True),
        ("mowdeck.kit", "mowdeck.demo", True),
        ("mowdeck.fleet", "mowdeck.devices", False),
        ("mowdeck.gateway", "simulator", False),
        ("mowdeck.commands", "mowdeck.realtime", False),
        ("mowdeck.demo", "mowdeck.fleet", False),
        ("mowdeck.fleet", "mowdeck.fleet", False),
    ],
    ids=[
        "service-to-service",
        "realtime-to-telemetry",
        "shared-to-service",
        "service-to-composing",
        "shared-to-composing",
        "service-to-shared",
        "gateway-to-device-protocol",
        "composing-to-service",
        "demo-to-service",
        "within-a-service",
    ],
)
def test_the_rules(importer: str, imported: str, crosses: bool) -> None:
    found = Import("x.py", 1, importer, imported)
    assert (refusal(found) is not None) is crosses


def test_no_package_crosses_a_boundary() -> None:
    crossings = [
        f"{i.path}:{i.line}: {why}"
        for i in ALL
        if i.importer in LAYERS
        and i.imported in LAYERS
        and (i.path, i.imported) not in CROSSINGS_ALLOWED
        and (why := refusal(i)) is not None
    ]
    assert crossings == [], "\n".join(crossings)


def test_every_allowed_crossing_is_still_there() -> None:
    # An exception whose import is gone would let the next one in unseen.
    found = {(i.path, i.imported) for i in ALL}
    assert sorted(set(CROSSINGS_ALLOWED) - found) == []


def test_every_import_names_a_package_in_the_table() -> None:
    unknown = sorted({f"{i.path}:{i.line}: {i.imported}" for i in ALL if i.imported not in LAYERS})
    assert unknown == []
