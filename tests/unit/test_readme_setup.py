"""The README's first commands work in a fresh shell (issue 52 item 11): they
make and activate a virtualenv before ``make demo`` and ``make test``, whose
``python`` is then the virtualenv's (a system Python refuses ``pip install``,
and many have no ``python`` at all)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def first_block() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "the README has no bash block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines()]


@pytest.mark.regression
def test_the_readme_makes_and_activates_a_virtualenv_before_make(tmp_path: Path) -> None:
    commands = [c for c in first_block() if c]
    makes = [i for i, c in enumerate(commands) if c.startswith("make ")]
    assert [commands[i] for i in makes] == ["make demo", "make test"], commands
    setup = commands[: makes[0]]
    assert any("venv" in c for c in setup) and any("activate" in c for c in setup), commands
    # The README's own lines, in a fresh directory: then `make` runs the venv's python.
    script = "\n".join([*setup, "command -v python", f"make -n -C {ROOT} demo test"])
    done = subprocess.run(
        ["bash", "-ec", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    python, *planned = done.stdout.splitlines()
    assert Path(python).parent.parent.parent == tmp_path, python
    assert any(line.startswith("python -m pip install") for line in planned), planned
