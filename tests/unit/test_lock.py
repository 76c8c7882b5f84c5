"""constraints.txt, the lock (`make lock`): every dependency pinned, nothing local.

`make install` (so CI) and docker/Dockerfile install with it as constraints; a
dependency of pyproject.toml missing from it would be installed at whatever
version the day offers, which is what the lock is there to stop.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = (ROOT / "Makefile").read_text()
LOCK_NAME = re.search(r"^LOCK := (\S+)$", MAKEFILE, re.MULTILINE)
assert LOCK_NAME is not None
LOCK = (ROOT / LOCK_NAME[1]).read_text()
PINS = {
    canonicalize_name(name): Version(version)
    for name, version in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$", LOCK, re.MULTILINE)
}


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + [
        line for extra in project["optional-dependencies"].values() for line in extra
    ]
    return [Requirement(line) for line in listed]


def test_every_line_of_the_lock_is_an_exact_pin_or_a_comment() -> None:
    for line in LOCK.splitlines():
        assert not line.strip() or line.lstrip().startswith("#") or "==" in line, line
    assert len(PINS) == sum("==" in line for line in LOCK.splitlines())


def test_every_runtime_and_dev_dependency_is_pinned_within_its_range() -> None:
    for requirement in project_requirements():
        name = canonicalize_name(requirement.name)
        assert name in PINS, f"{requirement} is not in the lock: run make lock"
        assert requirement.specifier.contains(PINS[name], prereleases=True), (
            f"the lock pins {name}=={PINS[name]}, outside {requirement}: run make lock"
        )


def test_the_lock_records_no_index_and_no_path_of_the_machine_that_made_it() -> None:
    for line in LOCK.splitlines():
        assert not line.startswith("-"), line  # --index-url, --extra-index-url, --find-links
        assert "file:" not in line and " @ " not in line, line
        assert not re.search(r"(^|\s)/\S", line), line  # an absolute path


def test_install_and_ci_install_with_the_lock() -> None:
    install = re.search(r"^install:\n\t(.+)$", MAKEFILE, re.MULTILINE)
    assert install is not None
    assert "-c $(LOCK)" in install[1] and "'.[dev]'" in install[1]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^test: install$", MAKEFILE, re.MULTILINE)
