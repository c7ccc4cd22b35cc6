"""The performance page against ``tests/bench/``, and references to the performance pages.

``docs/performance.md`` has one section per benchmark module, headed by the module's name
in backticks (``## `gateway` ``); other pages and the code cite sections of it and of
``docs/performance-log.md`` as ``performance-log.md``, "Heading" (a second quote names a
subsection). A module without a section, a section of no module, or a citation of a
heading that is not there fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("performance.md", "performance-log.md")

_SECTION = re.compile(r"^## `(?P<name>[^`]+)`", re.MULTILINE)
_HEADING = re.compile(r"^#+ (?P<title>.+)$", re.MULTILINE)
# performance-log.md`, "Gateway: the bound's size" ... the quotes may run over lines.
_CITATION = re.compile(r"(?P<page>performance(?:-log)?\.md)`*\)?(?P<quotes>(?:,\s*\"[^\"]+\")+)")
_QUOTE = re.compile(r"\"([^\"]+)\"")


def bench_mismatches(page: str, modules: Iterable[str]) -> tuple[list[str], list[str]]:
    """The modules without a section on ``page``, and the sections naming no module."""
    named = {m["name"] for m in _SECTION.finditer(page)}
    known = set(modules)
    return sorted(known - named), sorted(named - known)


def _plain(text: str) -> str:
    # A quote broken over two comment lines of Python carries the second line's ``#``.
    return " ".join(re.sub(r"\n\s*#", " ", text).split()).lower()


def unresolved_citations(text: str, headings: Mapping[str, list[str]]) -> list[str]:
    """Each ``page, "Heading"`` of ``text`` whose heading is in none of the page's headings.

    A citation names a heading by a part of it, case aside ("the bound at 192" for
    "Gateway: the bound at 192, and a saturated stop's hops").
    """
    missing = []
    for citation in _CITATION.finditer(text):
        page = citation["page"]
        titles = [_plain(title) for title in headings.get(page, [])]
        for quote in _QUOTE.findall(citation["quotes"]):
            if not any(_plain(quote) in title for title in titles):
                missing.append(f"{page}, {quote!r}")
    return missing


def _headings(page: str) -> list[str]:
    return [m["title"] for m in _HEADING.finditer((ROOT / "docs" / page).read_text())]


def _bench_modules() -> list[str]:
    return [p.stem for p in (ROOT / "tests" / "bench").glob("*.py") if p.stem != "__init__"]


def _citing_files() -> list[Path]:
    texts = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    for package in ("mowdeck", "actors", "simulator"):
        texts += (ROOT / package).rglob("*.py")
    return sorted(texts)


def test_every_benchmark_module_has_a_section_and_every_section_a_module() -> None:
    page = (ROOT / "docs" / "performance.md").read_text()
    missing, unknown = bench_mismatches(page, _bench_modules())
    assert missing == [], f"tests/bench modules without a section in docs/performance.md: {missing}"
    assert unknown == [], f"sections of docs/performance.md naming no tests/bench module: {unknown}"


def test_citations_of_the_performance_pages_name_headings_that_exist() -> None:
    headings = {page: _headings(page) for page in PAGES}
    unresolved = {
        str(path.relative_to(ROOT)): found
        for path in _citing_files()
        if (found := unresolved_citations(path.read_text(), headings))
    }
    assert unresolved == {}


@pytest.mark.parametrize(
    ("page", "modules", "expected"),
    [
        ("## `gateway`: commands\n\n## `fleet`\n", ["gateway", "fleet"], ([], [])),
        ("## `gateway`\n", ["gateway", "fleet"], (["fleet"], [])),
        ("## `gateway`\n## `gone`\n", ["gateway"], ([], ["gone"])),
        ("## Summary\n## Realtime's fallback states\n## `gateway`\n", ["gateway"], ([], [])),
        ("Some text about `fleet`.\n## `gateway`\n", ["gateway", "fleet"], (["fleet"], [])),
    ],
    ids=[
        "a-section-per-module",
        "a-module-without-a-section",
        "a-section-of-no-module",
        "sections-without-a-module-name-are-free",
        "a-mention-is-no-section",
    ],
)
def test_bench_mismatches(
    page: str, modules: list[str], expected: tuple[list[str], list[str]]
) -> None:
    assert bench_mismatches(page, modules) == expected


_LOG = {
    "performance-log.md": [
        "Performance log",
        "Gateway: the bound at 192, and a saturated stop's hops",
        "Notifications",
        "CPU per state: the collector",
    ]
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('(`docs/performance-log.md`, "Gateway: the bound at 192")', []),
        ('(docs/performance-log.md, "the bound at\n192, and a saturated")', []),
        ('(docs/performance-log.md, "Notifications", "CPU per\nstate")', []),
        ('    # (``docs/performance-log.md``, "CPU per\n    # state")', []),
        ("see `docs/performance.md` for the figures", []),
        (
            '(docs/performance-log.md, "Gateway: the bound at 256")',
            ["performance-log.md, 'Gateway: the bound at 256'"],
        ),
        (
            '(docs/performance-log.md, "Notifications", "The batched fan-out")',
            ["performance-log.md, 'The batched fan-out'"],
        ),
        ('(docs/performance.md, "Notifications")', ["performance.md, 'Notifications'"]),
    ],
    ids=[
        "a-heading-by-its-start",
        "a-part-over-two-lines",
        "a-section-and-its-subsection",
        "over-two-comment-lines",
        "the-page-alone",
        "no-such-heading",
        "no-such-subsection",
        "a-heading-of-the-other-page",
    ],
)
def test_unresolved_citations(text: str, expected: list[str]) -> None:
    assert unresolved_citations(text, _LOG) == expected
