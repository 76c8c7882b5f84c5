"""docs/ is the reference the code points at: every pointer must lead somewhere.

Code, tests, bench, docker files and the README name headings of the docs as
``docs/<file>.md#<anchor>`` (GitHub's heading anchors); the docs link to each
other and name tests as ``tests/.../test_x.py::test_name``. Each of those must
exist, and no reference to the spec outside the repository may come back.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SOURCES = ("shared", "services", "bench", "tests", "docker")
SKIPPED_SUFFIXES = {".pyc", ".png", ".db", ".ico", ".gz"}

DOC_REF = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)#([A-Za-z0-9_-]+)")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
# "SPEC <section sign>4.4", "spec <section sign>7", "<section sign>7 of the spec",
# and YAML's escaped "SPEC \\xA74.4"; the sign is escaped so that this test does not
# take its own file for a reference.
SPEC_REF = re.compile(r"(?i)spec\s+(?:\u00a7|\\xa7)|\u00a7\s?\d[\d.]*\s+of\s+the\s+spec")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than '-' and
    '_' dropped, each space a '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def anchors(name: str) -> frozenset[str]:
    """The anchors of docs/<name>'s headings (a repeated heading gets -1, -2...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in (DOCS / name).read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = None if fenced else re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def source_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            skipped = {"__pycache__", "artifacts"} & set(path.parts)
            if path.is_file() and not skipped and path.suffix not in SKIPPED_SUFFIXES:
                files.append(path)
    return files


def text_of(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_three_documents_exist() -> None:
    for name in ("architecture.md", "api.md", "operations.md"):
        assert anchors(name), f"docs/{name} has no headings"


def test_every_docs_reference_in_the_code_names_a_heading() -> None:
    broken = []
    count = 0
    for path in source_files():
        for match in DOC_REF.finditer(text_of(path)):
            count += 1
            name, anchor = match.groups()
            if not (DOCS / name).is_file():
                broken.append(f"{rel(path)}: docs/{name} does not exist")
            elif anchor not in anchors(name):
                broken.append(f"{rel(path)}: docs/{name} has no heading #{anchor}")
    assert not broken, "\n".join(broken)
    assert count > 100, "the code should point at the docs"


@pytest.mark.parametrize("name", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_relative_link_of_the_docs_exists(name: str) -> None:
    broken = []
    for match in MD_LINK.finditer(text_of(DOCS / name)):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        path = (DOCS / file_part).resolve() if file_part else DOCS / name
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (path.suffix != ".md" or path.parent != DOCS):
            broken.append(f"{target}: an anchor outside docs/ is not checked; link the file")
        elif anchor and anchor not in anchors(path.name):
            broken.append(f"{target}: docs/{path.name} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("name", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_test_the_docs_name_exists(name: str) -> None:
    missing = []
    for match in TEST_REF.finditer(text_of(DOCS / name)):
        file_name, test_name = match.groups()
        path = ROOT / file_name
        defined = re.compile(rf"^\s*(?:async\s+)?def {test_name}\b", re.MULTILINE)
        if not path.is_file():
            missing.append(f"{file_name}: no such file")
        elif not defined.search(path.read_text()):
            missing.append(f"{file_name}::{test_name}: no such test")
    assert not missing, "\n".join(missing)


def test_no_reference_to_the_outside_spec_remains() -> None:
    files = [ROOT / "openapi.yaml"]
    files += source_files()
    left = []
    for path in files:
        for number, line in enumerate(text_of(path).splitlines(), 1):
            if SPEC_REF.search(line):
                left.append(f"{rel(path)}:{number}: {line.strip()}")
    assert not left, "point these at a docs/<file>.md#<heading>:\n" + "\n".join(left)
