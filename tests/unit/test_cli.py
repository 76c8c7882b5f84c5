"""The command line: every command and option explains itself; gen makes every kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from services.commands.cli import app
from shared.domain.kinds import BATCH, KINDS
from shared.domain.synthetic import GENERATORS

runner = CliRunner()


# Each test configures this process's logging, as every CLI command does.
pytestmark = pytest.mark.usefixtures("restore_logging")


def commands(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, command in group.commands.items():
        yield (*prefix, name), command
        if hasattr(command, "commands"):
            yield from commands(command, (*prefix, name))


ALL = sorted(commands(typer.main.get_command(app)))


def test_the_spec_commands_exist() -> None:
    names = {path for path, _ in ALL}
    for wanted in ("api", "worker", "relay", "up", "migrate", "submit", "status", "gen", "demo"):
        assert (wanted,) in names
    for sub in ("list", "show", "requeue", "discard"):
        assert ("dlq", sub) in names
    for sub in ("list", "show", "stats", "resolve"):
        assert ("disputes", sub) in names


@pytest.mark.parametrize("path", [path for path, _ in ALL], ids=" ".join)
def test_help_gives_a_purpose_and_documents_every_option(path: tuple[str, ...]) -> None:
    command = dict(ALL)[path]
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert (command.help or "").strip(), f"settleq {' '.join(path)} has no help"
    undocumented = [
        p.name for p in command.params if p.name != "help" and not (getattr(p, "help", "") or "")
    ]
    assert undocumented == [], f"settleq {' '.join(path)}: options without help"


def test_top_level_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("submit", "status", "gen", "demo", "up", "dlq", "disputes"):
        assert name in result.output


def test_gen_makes_every_kind_of_the_registry() -> None:
    # gen takes the kinds of shared.domain.kinds.KINDS, and makes each of them.
    assert set(GENERATORS) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_gen_makes_a_valid_batch_of_every_kind(kind: str) -> None:
    result = runner.invoke(app, ["gen", "--kind", kind, "--lines", "40", "--partitions", "2"])
    assert result.exit_code == 0, result.output
    batch = BATCH.validate_python(json.loads(result.stdout))
    assert batch.kind == kind
    assert sum(KINDS[kind].line_count(d) for d in batch.documents) == 40
    assert len({d.partition_key for d in batch.documents}) == 2


def test_gen_ndjson_is_a_kind_line_then_one_document_per_line() -> None:
    result = runner.invoke(app, ["gen", "--kind", "freight_audit", "--lines", "6", "--ndjson"])
    header, *documents = [json.loads(line) for line in result.stdout.splitlines()]
    assert header == {"kind": "freight_audit"}
    assert sum(len(d["legs"]) for d in documents) == 6


def test_gen_refuses_an_unknown_kind() -> None:
    result = runner.invoke(app, ["gen", "--kind", "payroll"])
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--decision", "accept_claim", "--note", "n"], "--all"),
        (["7", "--all", "--decision", "accept_claim", "--note", "n"], "not both"),
        (["--all", "--decision", "accept_claim", "--note", "n"], "--limit"),
        (
            ["--all", "--limit", "5", "--decision", "settle_at", "--amount", "1", "--note", "n"],
            "--all takes no --amount",
        ),
    ],
)
def test_disputes_resolve_refuses_an_ambiguous_request_before_sending_it(
    args: list[str], message: str
) -> None:
    result = runner.invoke(
        app, ["disputes", "resolve", *args, "--token", "t", "--url", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 2 and message in result.output, result.output
