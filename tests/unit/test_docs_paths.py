"""Every file the README and docs/ name exists, and so does every function or
class they name in one (``path.py::name``): a module moved or renamed takes
its mentions with it, or this test names each one left behind."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A repo-relative path under one of the project's own folders, optionally with
# ``::name`` (a function, a class, Class.method, or a test's name ending in ``_``
# for the tests it begins).
_PATH = re.compile(
    r"(?<![\w/.-])((?:shared|services|bench|tests|docker|scripts|\.ci)/[\w/.-]*\w)"
    r"(?:::([A-Za-z_][\w.]*))?"
)
# A module named relative to a folder the text already gave (``ledger/writer.py::writer_for``).
_RELATIVE = re.compile(r"(?<![\w/.-])((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)::([A-Za-z_][\w.]*)")
_ROOTS = ("shared/", "services/", "bench/", "tests/", "docker/", "scripts/", ".ci/")
# Written by test runs, not kept in the tree.
_GENERATED = ("tests/artifacts/",)


def _mentions() -> list[tuple[str, str, str | None]]:
    found: list[tuple[str, str, str | None]] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _PATH.finditer(text):
            if not match[1].startswith(_GENERATED):
                found.append((doc.name, match[1], match[2]))
        for match in _RELATIVE.finditer(text):
            if not match[1].startswith(_ROOTS):
                found.append((doc.name, _resolve(match[1]), match[2]))
    return found


@cache
def _modules() -> tuple[str, ...]:
    return tuple(
        str(p.relative_to(ROOT))
        for root in ("shared", "services", "bench", "tests")
        for p in (ROOT / root).rglob("*.py")
    )


def _resolve(relative: str) -> str:
    """The one module whose path ends with ``relative`` (else ``relative`` itself,
    which then does not exist)."""
    matches = [m for m in _modules() if m == relative or m.endswith("/" + relative)]
    return matches[0] if len(matches) == 1 else relative


def _defines(path: Path, name: str) -> bool:
    text = path.read_text(encoding="utf-8")
    last = re.escape(name.split(".")[-1]) + ("" if name.endswith("_") else r"\b")
    defined = rf"^\s*(?:async\s+def|def|class)\s+{last}"
    assigned = rf"^{last}\s*[:=]"
    return re.search(defined, text, re.M) is not None or re.search(assigned, text, re.M) is not None


def test_the_docs_name_only_files_that_exist() -> None:
    mentions = _mentions()
    assert len(mentions) > 50  # the patterns still find the docs' paths
    missing = sorted({f"{doc}: {path}" for doc, path, _ in mentions if not (ROOT / path).exists()})
    assert not missing, "named in the docs but not in the tree:\n" + "\n".join(missing)


def test_the_docs_name_only_functions_that_exist() -> None:
    missing = sorted(
        {
            f"{doc}: {path}::{name}"
            for doc, path, name in _mentions()
            if name and (ROOT / path).is_file() and not _defines(ROOT / path, name)
        }
    )
    assert not missing, "named in the docs but not defined there:\n" + "\n".join(missing)
