"""A newcomer never sees a traceback (docs/operations.md#commands, issue 29 item
11; what ../shared/tools/fresh-start tries, as a test): every command's
``--help``, and every malformed setting or unreachable service a command meets,
run as the user runs it, in a process of its own. Each says what is wrong in
one line, with its exit code (1 refused or failed, 2 usage or configuration),
and starts nothing."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import typer.main

from services.commands.cli import app
from tests.support.cli import SETTLEQ
from tests.support.infra import PG_HOST, new_prefix
from tests.support.stack import ROOT, free_port

pytestmark = pytest.mark.e2e


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        yield (*prefix, name)
        if hasattr(command, "commands"):
            yield from _commands(command, (*prefix, name))


EVERY_COMMAND = sorted(_commands(typer.main.get_command(app)))


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment: no SETTLEQ_* setting but a queue prefix of its own
    (nothing here may declare a queue; if it did, it is not the shared ones),
    run in an empty directory (the SQLite default lands there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETTLEQ_")}
    env["PYTHONPATH"] = str(ROOT)
    env["SETTLEQ_QUEUE_PREFIX"] = new_prefix()
    env["COLUMNS"] = "120"
    yield env


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 90) -> Any:
    done = subprocess.run(
        [*SETTLEQ, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def test_every_commands_help_without_a_traceback(fresh: dict[str, str], tmp_path: Path) -> None:
    paths: list[tuple[str, ...]] = [(), *EVERY_COMMAND]
    with ThreadPoolExecutor(max_workers=2) as pool:
        codes = list(pool.map(lambda p: run([*p, "--help"], fresh, tmp_path).returncode, paths))
    assert [(p, c) for p, c in zip(paths, codes, strict=True) if c] == []
    assert len(paths) > 30


def one_line(done: Any, code: int, *says: str) -> str:
    """The command's one line on stderr (its JSON log lines, if any, aside)."""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert done.returncode == code, done.stdout + done.stderr
    assert len(lines) == 1, done.stderr
    assert all(part in lines[0] for part in says), lines[0]
    return str(lines[0])


MALFORMED_DATABASE_URLS = {
    "no-scheme": ("127.0.0.1:5432/db", "has no scheme"),
    "a-word": ("foo", "has no scheme"),
    "mysql": ("mysql://u@127.0.0.1/x", "names mysql"),
    "libpq-host-list": ("postgresql://u@h1:5432,h2:5432/x", "write each as a host parameter"),
    "sqlite-no-directory": ("sqlite:////nonexistent-dir/x.db", "/nonexistent-dir does not exist"),
}


@pytest.mark.regression
@pytest.mark.parametrize("command", ["up", "migrate"])
@pytest.mark.parametrize("name", list(MALFORMED_DATABASE_URLS))
def test_a_malformed_database_url_is_one_line_and_exit_2(
    command: str, name: str, fresh: dict[str, str], tmp_path: Path
) -> None:
    url, says = MALFORMED_DATABASE_URLS[name]
    args = [command, "--port", str(free_port())] if command == "up" else [command]
    done = run(args, {**fresh, "SETTLEQ_DATABASE_URL": url}, tmp_path)
    line = one_line(done, 2, f"settleq {command}: configuration error: SETTLEQ_DATABASE_URL", says)
    assert "password" not in line and "API on" not in done.stdout  # nothing started


@pytest.mark.regression
def test_an_unreachable_database_or_broker_is_one_line_and_exit_1(
    fresh: dict[str, str], tmp_path: Path
) -> None:
    missing = f"postgresql://postgres@{PG_HOST}:5432/settleq_no_such_database"
    for command in (["migrate"], ["up", "--port", str(free_port())]):
        done = run(command, {**fresh, "SETTLEQ_DATABASE_URL": missing}, tmp_path)
        one_line(done, 1, f"settleq {command[0]}: database_unreachable")
    refused = {**fresh, "SETTLEQ_BROKER_URL": "amqp://bad:bad@127.0.0.1:5672/"}
    up = ["up", "--port", str(free_port())]  # on the SQLite default, in tmp_path
    refusal = run(up, refused, tmp_path)
    one_line(refusal, 1, "settleq up: broker_auth_failed")
    assert refusal.stderr.count("\n") == 1, refusal.stderr  # no migration log before it
    down = {**fresh, "SETTLEQ_BROKER_URL": "amqp://guest:guest@127.0.0.1:9/"}
    tail = run(["events", "tail"], down, tmp_path)
    assert tail.stderr.count("\n") == 1, tail.stderr  # pika's own records are not the user's
    line = one_line(tail, 1, "settleq events tail: ")
    assert "127.0.0.1:9" in line and "SETTLEQ_BROKER_URL" in line


@pytest.mark.regression
@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:8000", "has no scheme: write http://localhost:8000"),
        ("127.0.0.1:8000", "has no scheme: write http://127.0.0.1:8000"),
        ("ftp://127.0.0.1:8000", "is not http:// or https://"),
        ("http://[::1", "is not a URL"),
    ],
)
def test_an_api_url_without_a_scheme_says_so_and_exit_2(
    url: str, says: str, fresh: dict[str, str], tmp_path: Path
) -> None:
    env = {**fresh, "SETTLEQ_URL": url, "SETTLEQ_CLIENT_TOKEN": "t"}
    line = one_line(run(["status", "0123456789abcdef"], env, tmp_path), 2, says, "SETTLEQ_URL")
    assert "://:" not in line


def test_no_stack_and_no_file_are_one_line_and_exit_1(
    fresh: dict[str, str], tmp_path: Path
) -> None:
    env = {**fresh, "SETTLEQ_URL": f"http://127.0.0.1:{free_port()}", "SETTLEQ_CLIENT_TOKEN": "t"}
    one_line(run(["status", "0123456789abcdef"], env, tmp_path), 1, "cannot reach the API")
    signed = {**fresh, "SETTLEQ_CLIENT_KEY_ID": "k", "SETTLEQ_CLIENT_SECRET": "s"}
    one_line(run(["submit", "/nonexistent.json"], signed, tmp_path), 1, "cannot read")
