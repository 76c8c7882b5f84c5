"""Every file the README and docs/ name exists, and so does every function or
class they name in one (``path.py::name``): a module moved or renamed takes
its mentions with it, or this test names each one left behind.

A path is checked in each form the docs write it: from the repository's root
(``shared/adapters/db/ledger/writer.py``, ``docker/compose.yaml``, ``.ci/run``),
relative to a folder the text already gave (``ledger/rounds.py``,
``mapping.py::map_stream``), as a bare module name (``ack.py``: some module of
that name) and as a dotted module (``python -m bench.run``). A path under
another root (a URL, ``/etc/...``, a file an example command writes in the
current directory) is not the repository's and is left alone.

The map in docs/architecture.md#layout is checked both ways: every file and
folder it names is where it says, and every package under ``shared/`` and
``services/`` is on it (issue 31: ``x12/`` was missing)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_ROOTS = ("shared/", "services/", "bench/", "tests/", "docker/", "scripts/", ".ci/")
_CODE_ROOTS = ("shared", "services", "bench", "tests")
# A repo-relative path under one of the project's own folders, optionally with
# ``::name`` (a function, a class, Class.method, or a test's name ending in ``_``
# for the tests it begins).
_PATH = re.compile(
    r"(?<![\w/.-])((?:shared|services|bench|tests|docker|scripts|\.ci)/[\w/.-]*\w)"
    r"(?:::([A-Za-z_][\w.]*))?"
)
# A module named relative to a folder the text already gave, with or without a
# name in it (``ledger/writer.py::writer_for``, ``edi/layout.py``, ``ack.py``).
_RELATIVE = re.compile(r"(?<![\w/.-])((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)\b(?:::([A-Za-z_][\w.]*))?")
# A dotted module of the project's (``python -m bench.run``,
# ``shared.domain.x12.reading.lazy``), possibly followed by a name in it.
_DOTTED = re.compile(r"(?<![\w/.-])((?:shared|services|bench|tests)(?:\.[a-z_][a-z_0-9]*)+)\b")
# Written by test runs, not kept in the tree.
_GENERATED = ("tests/artifacts/",)

Mention = tuple[str, str, str | None]


def _mentions() -> list[Mention]:
    """(doc, repo-relative path, name in it or None) for every path the docs name."""
    found: list[Mention] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _PATH.finditer(text):
            if not match[1].startswith(_GENERATED):
                found.append((doc.name, match[1], match[2]))
        for match in _RELATIVE.finditer(text):
            if not match[1].startswith(_ROOTS):
                found.append((doc.name, _resolve(match[1], match[2]), match[2]))
        for match in _DOTTED.finditer(text):
            found.append((doc.name, *_dotted(match[1])))
    return found


@cache
def _modules() -> tuple[str, ...]:
    return tuple(
        p.relative_to(ROOT).as_posix()
        for root in _CODE_ROOTS
        for p in (ROOT / root).rglob("*.py")
        if "__pycache__" not in p.parts
    )


def _resolve(relative: str, name: str | None) -> str:
    """A module whose path ends with ``relative`` (of several, one that defines
    ``name``), else ``relative`` itself, which then does not exist."""
    matches = [m for m in _modules() if m == relative or m.endswith("/" + relative)]
    if name:
        matches = [m for m in matches if _defines(ROOT / m, name)] or matches
    return matches[0] if matches else relative


def _dotted(dotted: str) -> tuple[str, str | None]:
    """``a.b.c`` as the longest module it begins with and the name after it; where
    that module is a package that does not define the name, the module the name
    would be (``bench.gone``: ``bench/gone.py``, which does not exist)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = "/".join(parts[:n])
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if (ROOT / path).is_file():
                rest = ".".join(parts[n:]) or None
                if rest and path.endswith("__init__.py") and not _defines(ROOT / path, rest):
                    return f"{base}/{parts[n]}.py", None
                return path, rest
    return "/".join(parts) + ".py", None


@cache
def _definitions(path: Path) -> frozenset[str]:
    """What a module defines: its top-level functions, classes and assigned names,
    and each class's as ``Class.member``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()

    def assigned(node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Assign):
            return [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(prefix + node.name)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body, prefix)  # a definition under ``if TYPE_CHECKING:`` etc.
            names.update(prefix + name for name in assigned(node))

    visit(tree.body, "")
    return frozenset(names)


def _defines(path: Path, name: str) -> bool:
    """``name`` (``f``, ``Class``, ``Class.method``) is defined in ``path``; a name
    ending in ``_`` stands for the tests that begin with it."""
    defined = _definitions(path)
    if name.endswith("_"):
        return any(d.startswith(name) for d in defined)
    return name in defined


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
            if name and path.endswith(".py") and (ROOT / path).is_file()
            if not _defines(ROOT / path, name)
        }
    )
    assert not missing, "named in the docs but not defined there:\n" + "\n".join(missing)


# --- the map in docs/architecture.md#layout -----------------------------------------

_ENTRY = re.compile(r"^( *)(\S+)(?: +(.*))?$")
_FILE_IN_TEXT = re.compile(r"(?<![\w/.-])([\w-]+(?:/[\w-]+)*\.(?:py|yaml|yml|js|toml|json))\b")
_FOLDER_IN_TEXT = re.compile(r"(?<![\w/.-])([\w-]+)/(?![\w/])")


def _layout() -> list[tuple[str, str, str]]:
    """(path, where the map names it: ``entry`` or ``text``, the line) for each
    file and folder the map names; an entry's path follows its indentation, a
    name in its description is relative to the entry's folder."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1]
    block = section.split("```", 2)[1].split("\n", 1)[1]
    lines = [line for line in block.splitlines() if line.strip()]
    # Descriptions start at one column: a line indented that far goes on the
    # description above it.
    column = min(m.start(3) for m in map(_ENTRY.match, lines) if m and m[3])
    found: list[tuple[str, str, str]] = []
    folders: list[str] = []  # the current entry's folder chain
    folder = ""
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if indent < column:
            match = _ENTRY.match(line)
            assert match, line
            level = len(match[1]) // 2
            name, description = match[2], match[3] or ""
            folders = folders[:level]
            path = "/".join([*folders, name.rstrip("/")])
            found.append((path, "entry", line))
            if name.endswith("/"):
                folders.append(name.rstrip("/"))
            folder = "/".join(folders)
        else:
            description = line.strip()
        for match in _FILE_IN_TEXT.finditer(description):
            found.append((f"{folder}/{match[1]}", "text", line))
        for match in _FOLDER_IN_TEXT.finditer(description):
            found.append((f"{folder}/{match[1]}", "text", line))
    assert len(found) > 40  # the map is still parsed
    return found


def test_the_layout_names_only_files_and_folders_that_exist() -> None:
    missing = sorted(
        {f"{path}  ({line.strip()})" for path, _, line in _layout() if not (ROOT / path).exists()}
    )
    assert not missing, "docs/architecture.md#layout names what is not there:\n" + "\n".join(
        missing
    )


def test_every_package_is_on_the_layout() -> None:
    layout = _layout()
    named = {path for path, _, _ in layout}
    entries = {path for path, how, _ in layout if how == "entry"}
    # A folder named only in a description is a leaf of the map: what is inside
    # it (migrations/versions/) need not be named.
    leaves = named - entries
    packages = sorted(
        init.parent.relative_to(ROOT).as_posix()
        for root in ("shared", "services")
        for init in (ROOT / root).rglob("__init__.py")
        if "__pycache__" not in init.parts
    )
    off_the_map = [
        package
        for package in packages
        if package not in named and not any(package.startswith(leaf + "/") for leaf in leaves)
    ]
    assert not off_the_map, (
        "packages missing from docs/architecture.md#layout (add each where it sits):\n"
        + "\n".join(off_the_map)
    )
