"""``docs/architecture.md``'s layout is the code's: made from the packages, checked here.

The block under "Layout" lists every package of the project with the first line of its
docstring and, for the packages ``tests/unit/test_import_boundaries.py`` classifies, what
it is (a service, shared, composing). When a package is added, moved or described anew,
this test fails and prints the block to paste.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.unit.test_import_boundaries import LAYERS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
ROOTS = ("actors", "contracts", "mowdeck", "simulator")
_BLOCK = re.compile(r"## Layout\n.*?```text\n(?P<block>.*?)```", re.DOTALL)


def _summary(package: Path) -> str:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    return (doc or "").split("\n", 1)[0].strip()


def layout() -> str:
    """The layout block: every package, indented by depth, with its kind and summary."""
    packages = sorted(
        p.parent
        for root in ROOTS
        for p in (ROOT / root).rglob("__init__.py")
        if "__pycache__" not in p.parts
    )
    lines = []
    for package in packages:
        relative = package.relative_to(ROOT)
        depth = len(relative.parts) - 1
        name = "  " * depth + relative.name + "/"
        kind = LAYERS.get(".".join(relative.parts), ("", ""))[0]
        lines.append(f"{name:<32}{kind:<10}{_summary(package)}".rstrip())
    return "\n".join(lines) + "\n"


def test_the_page_shows_the_packages_as_they_are() -> None:
    found = _BLOCK.search(PAGE.read_text())
    assert found is not None, "docs/architecture.md has no ```text block under ## Layout"
    expected = layout()
    assert found["block"] == expected, f"paste this under ## Layout:\n```text\n{expected}```"


def test_every_package_says_what_it_holds() -> None:
    silent = [
        str(p.parent.relative_to(ROOT))
        for root in ROOTS
        for p in (ROOT / root).rglob("__init__.py")
        if not _summary(p.parent)
    ]
    assert silent == []
