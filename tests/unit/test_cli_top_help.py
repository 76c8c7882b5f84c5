"""``settleq --help`` names every command in its summary (issue 42, item 17): the
summary's lists were kept by hand and left out webhooks, partners, lines, …"""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from services.commands.cli import app

pytestmark = pytest.mark.usefixtures("restore_logging")


@pytest.mark.regression
def test_top_level_help_summary_names_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    summary = " ".join(result.output.split("─ Options")[0].split())
    words = set(re.findall(r"[a-z]+", summary))
    names = list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert len(names) > 20
    missing = [name for name in names if name not in words]
    assert missing == [], f"settleq --help's summary leaves out {missing}"
