"""Every command's ``--help`` as an operator reads it (issue 15, item 4): each
option's default is shown (Rich ate ``[default: ...]`` as markup), a flag has no
``<bool>`` placeholder, ``--token`` names the role the command needs; and
``settleq up`` serves on SETTLEQ_API_PORT unless --port says otherwise."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from typer.testing import CliRunner

import services.commands.cli
from services.commands.cli import Runs, app
from tests.support.stack import free_port
from tests.unit.test_cli import ALL

pytestmark = pytest.mark.usefixtures("restore_logging")
runner = CliRunner()
WIDE = {"COLUMNS": "250", "TERM": "dumb"}
WRITES = {
    ("dlq", "requeue"),
    ("dlq", "discard"),
    ("disputes", "resolve"),
    ("contracts", "put"),
    ("partners", "put"),
    ("partitions", "put"),
    ("periods", "close"),
    ("deductions", "decide"),
}


def render(path: tuple[str, ...]) -> str:
    result = runner.invoke(app, [*path, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=" ".join)
def test_help_shows_every_default_and_no_flag_placeholder(path: tuple[str, ...]) -> None:
    command: Any = dict(ALL)[path]
    text = render(path)
    assert "<bool>" not in text
    lines = {line for line in text.splitlines() if "--" in line}
    for param in command.params:
        if not isinstance(param, click.Option) or param.name == "help":
            continue
        row = " ".join(line for line in lines if param.opts[0] in line)
        assert row, f"{param.opts[0]} missing from {' '.join(path)} --help"
        if param.is_flag or param.default is None and not param.show_default:
            continue
        if param.default is None:
            assert "[default: " in (param.help or ""), f"{param.opts[0]}: no default documented"
        else:
            assert "[default: " in text, f"{param.opts[0]} of {' '.join(path)}: no default shown"
    for param in command.params:
        if (
            isinstance(param, click.Option)
            and param.default is None
            and "[default: " in (param.help or "")
        ):
            shown = re.sub(r"\\\[", "[", param.help.split("[default: ")[1].split("]")[0])
            assert shown in " ".join(text.split()), f"{param.opts[0]}: default eaten as markup"


def test_defaults_documented_in_the_help_string_survive_rich() -> None:
    text = " ".join(render(("api",)).split())
    assert "[default: SETTLEQ_API_PORT, 8000]" in text
    assert "[default: SETTLEQ_API_HOST, 127.0.0.1]" in text
    assert "[default: SETTLEQ_API_PORT, 8000]" in " ".join(render(("up",)).split())


def test_flags_have_a_negative_form_or_none_and_no_placeholder() -> None:
    text = render(("submit",))
    assert "--wait" in text and "--no-wait" in text and "<bool>" not in text


@pytest.mark.parametrize(
    "path", [p for p, _ in ALL if any(o.name == "token" for o in dict(ALL)[p].params)], ids=" ".join
)
def test_token_help_names_the_role_the_command_needs(path: tuple[str, ...]) -> None:
    token = next(o for o in dict(ALL)[path].params if o.name == "token")
    # webhooks: a producer's commands sign; its --token is an operator's (--all, disable).
    needs_operator = path in WRITES or path[0] in ("dlq", "audit", "contracts", "webhooks", "keys")
    assert ("Operator bearer token" in (token.help or "")) is needs_operator, token.help


@pytest.mark.parametrize("told", [False, True], ids=["SETTLEQ_API_PORT", "--port"])
def test_up_serves_on_settleq_api_port_unless_told(
    told: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    def supervise(settings: Any, specs: list[Any], counts: Any, started: Any) -> int:
        seen["api"] = next(s.argv for s in specs if s.name == "api")
        return 0

    # Which port, not whether the services are up (tests/e2e/test_startup_checks.py).
    monkeypatch.setattr(services.commands.cli.preflight, "check", lambda *args: None)
    setting, option = free_port(), free_port()
    env = {
        "SETTLEQ_API_PORT": str(setting),
        "SETTLEQ_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",  # up migrates it first
    }
    argv = ["up", *(["--port", str(option)] if told else [])]
    result = runner.invoke(app, argv, env=env, obj=Runs(supervise=supervise))
    assert result.exit_code == 0, result.output
    api = seen["api"]
    assert api[api.index("--port") + 1] == str(option if told else setting)


def test_relay_starts_with_a_retired_setting_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # docs/operations.md#batched-outcome-events: an upgrade keeping
    # SETTLEQ_RELAY_DEFER_MAX_S must not stop event publication.
    import services.relay.relay

    ran: list[Any] = []
    monkeypatch.setattr(services.relay.relay, "run_relay", ran.append)
    monkeypatch.setattr(services.commands.cli.preflight, "check", lambda *args: None)
    env = {
        "SETTLEQ_RELAY_DEFER_MAX_S": "30",
        "SETTLEQ_LOG_FORMAT": "json",
        "SETTLEQ_DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
    }
    result = runner.invoke(app, ["relay"], env=env)
    assert result.exit_code == 0, result.output
    assert len(ran) == 1
    warned = [line for line in result.output.splitlines() if "SETTLEQ_RELAY_DEFER_MAX_S" in line]
    assert len(warned) == 1 and '"level": "warning"' in warned[0], result.output


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.regression
@pytest.mark.parametrize("path", [(), *(p for p, _ in ALL)], ids=lambda p: " ".join(p) or "settleq")
def test_help_breaks_no_line_mid_sentence(path: tuple[str, ...]) -> None:
    """Issue 52 item 11: typer kept a docstring's line breaks inside a paragraph
    (``compute_heavy settles them,`` then ``webhooks delivers …`` on a line of its
    own). Wide enough for any paragraph, each is printed on one line, and each
    subcommand's summary in its group's list too."""
    command: Any = app if not path else dict(ALL)[path]
    text = render(path)
    rows = [_one_line(line.strip("│ ")) for line in text.splitlines()]
    helps = [command.help] if path else []
    if not path:
        group: Any = typer.main.get_command(app)
        helps = [group.help] + [
            (c.help or "").split("\n\n")[0] for c in group.commands.values() if not c.hidden
        ]
    for help_text in helps:
        for paragraph in inspect.cleandoc(help_text or "").split("\n\n"):
            wanted = _one_line(paragraph)
            if wanted and len(wanted) < 200:
                assert any(wanted in row for row in rows), f"{wanted!r} broken in:\n{text}"
