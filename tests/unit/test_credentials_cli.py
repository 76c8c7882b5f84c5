"""``settleq keys create`` / ``tokens create``, the start-up warnings for
missing credentials and the one-line configuration error of every server
command (docs/operations.md#credentials)."""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.commands.cli import app
from services.commands.preflight import missing_credentials, warn_metrics_token, warn_missing
from shared.config.settings import ProducerKey, Settings
from shared.domain.signing import token_digest

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("restore_logging")
ROOT = Path(__file__).resolve().parents[2]
SERVER_COMMANDS = [["api"], ["worker"], ["relay"], ["up"], ["migrate"], ["openapi"]]


def _value(output: str, label: str) -> str:
    """The value after ``label`` on its comment line (``# secret:  ...``)."""
    line = next(line for line in output.splitlines() if line.startswith(f"# {label}"))
    return line.removeprefix(f"# {label}").split()[0]


def test_keys_create_prints_a_working_entry_once() -> None:
    result = runner.invoke(app, ["keys", "create", "--partitions", "A, B", "--key-id", "acme"])
    assert result.exit_code == 0, result.output
    secret = _value(result.output, "secret:")
    assert _value(result.output, "key id:") == "acme" and len(secret) >= 32
    entry = json.loads(next(x[1:] for x in result.output.splitlines() if x.startswith("#   {")))
    key = ProducerKey.model_validate(entry)
    assert key.key_id == "acme" and key.secrets == [secret] and key.partitions == ["A", "B"]
    # The one-key line is a valid SETTLEQ_PRODUCER_KEYS as it stands.
    line = next(x for x in result.output.splitlines() if "SETTLEQ_PRODUCER_KEYS='" in x)
    keys = json.loads(line.split("=", 1)[1].strip("'"))
    os.environ["SETTLEQ_PRODUCER_KEYS"] = json.dumps(keys)
    try:
        assert Settings().producer_key("acme") == key
    finally:
        del os.environ["SETTLEQ_PRODUCER_KEYS"]


def test_keys_create_for_every_partition_and_a_random_id() -> None:
    first = runner.invoke(app, ["keys", "create", "--partitions", "*"])
    second = runner.invoke(app, ["keys", "create", "--partitions", "*"])
    assert first.exit_code == second.exit_code == 0
    assert '"partitions": ["*"]' in first.output
    assert _value(first.output, "key id:") != _value(second.output, "key id:")
    assert _value(first.output, "secret:") != _value(second.output, "secret:")


def test_keys_create_refuses_a_bad_key_id() -> None:
    result = runner.invoke(app, ["keys", "create", "--partitions", "*", "--key-id", "a b"])
    assert result.exit_code == 2


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_tokens_create_prints_the_token_and_the_digest_the_server_takes(role: str) -> None:
    result = runner.invoke(app, ["tokens", "create", "--role", role])
    assert result.exit_code == 0, result.output
    token = _value(result.output, "token:")
    digest = _value(result.output, "sha-256:")
    assert digest == token_digest(token)
    assert f"SETTLEQ_{role.upper()}_TOKENS={digest}" in result.output
    settings = Settings(**{f"{role}_tokens": [digest]})  # type: ignore[arg-type]
    assert settings.token_role(token) == role


def test_every_missing_credential_is_named_with_its_fix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="settleq.preflight"):
        warn_missing(Settings(producer_keys=[], viewer_tokens=[], operator_tokens=[]))
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "no producer keys" in x and "every POST /v1/batches will be 401" in x and "keys create" in x
        for x in lines
    )
    assert any("no viewer tokens" in x and "--role viewer" in x for x in lines)
    assert any("no operator tokens" in x and "--role operator" in x for x in lines)
    full = Settings(
        producer_keys=[ProducerKey(key_id="k", secrets=["s"], partitions=["*"])],
        viewer_tokens=["a" * 64],
        operator_tokens=["b" * 64],
    )
    assert missing_credentials(full) == []


@pytest.mark.parametrize("command", SERVER_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("variable", "value", "names"),
    [
        ("SETTLEQ_OPERATOR_TOKENS", "mysecrettoken", "SETTLEQ_OPERATOR_TOKENS"),
        ("SETTLEQ_PRODUCER_KEYS", '[{"key_id": "k", "secrets": "mysecret-42"', "PRODUCER_KEYS"),
    ],
    ids=["clear-token", "malformed-keys"],
)
def test_a_configuration_error_is_one_line_and_exit_2(
    command: list[str], variable: str, value: str, names: str
) -> None:
    result = runner.invoke(app, command, env={variable: value})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0] and "e.g." in lines[0], lines
    assert lines[0].startswith(f"settleq {command[0]}: configuration error: ")
    assert "mysecret" not in result.output


def test_a_configuration_error_reaches_the_terminal_without_a_traceback() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SETTLEQ_OPERATOR_TOKENS": "mysecrettoken"}
    done = subprocess.run(
        [sys.executable, "-m", "services.commands.cli", "api"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "mysecrettoken" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_worker_serving_metrics_without_tokens_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="settleq.preflight"):
        warn_metrics_token(Settings(viewer_tokens=[], operator_tokens=[]), 9191)
        warn_metrics_token(Settings(viewer_tokens=[], operator_tokens=[]), 0)
        warn_metrics_token(Settings(viewer_tokens=["a" * 64]), 9191)
    [record] = caplog.records
    assert "port 9191" in record.getMessage() and "--role viewer" in record.getMessage()


def _readme_credential_commands() -> list[str]:
    """The walk-through's credential commands, in the README's order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [
        line.split("#", 1)[0].strip()
        for line in text.splitlines()
        if line.startswith(("settleq keys create", "settleq tokens create"))
    ]


@pytest.mark.regression
def test_the_readmes_credentials_pasted_in_order_leave_this_shell_an_operator() -> None:
    """What each command prints, pasted (eval'd) in the README's order, is the
    server's settings and a client that signs with the key and holds the
    operator's token: the viewer's printed last must not take it (issue 29, 14)."""
    commands = _readme_credential_commands()
    assert (
        [c.split()[1:3] for c in commands]
        == [
            ["keys", "create"],
            ["tokens", "create"],
            ["tokens", "create"],
        ]
        and commands[1].endswith("operator")
        and commands[2].endswith("viewer")
    ), commands
    me = f"{shlex.quote(sys.executable)} -m services.commands.cli"
    script = "".join(
        f'out=$({c.replace("settleq", me, 1)}) || exit 9; printf "%s\\n" "$out" >&2; eval "$out"\n'
        for c in commands
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SETTLEQ_")}
    done = subprocess.run(
        ["bash", "-c", script + "env"],
        env={**clean, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "command not found" not in done.stderr, done.stderr
    printed = done.stderr
    env = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("SET"))
    settings = Settings(
        producer_keys=json.loads(env["SETTLEQ_PRODUCER_KEYS"]),
        operator_tokens=env["SETTLEQ_OPERATOR_TOKENS"].split(","),
        viewer_tokens=env["SETTLEQ_VIEWER_TOKENS"].split(","),
    )
    assert settings.token_role(env["SETTLEQ_CLIENT_TOKEN"]) == "operator"
    key = settings.producer_key(env["SETTLEQ_CLIENT_KEY_ID"])
    assert key is not None and key.secrets == [env["SETTLEQ_CLIENT_SECRET"]]
    # The viewer's token was printed, for the dashboard, and is a viewer's.
    viewer = printed.split("give it to the viewer")[0].rsplit("# token:", 1)[1].split()[0]
    assert settings.token_role(viewer) == "viewer"
    # Every line printed for the shell is an export or a comment.
    assert all(
        line.startswith(("export SETTLEQ_", "#")) for line in printed.splitlines() if line
    ), printed


@pytest.mark.regression
def test_the_demos_credentials_file_is_never_committed() -> None:
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "settleq-demo-credentials.env"], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0


@pytest.mark.regression
def test_keys_create_prints_a_bootstrap_key_before_the_stack_runs_even_with_a_token() -> None:
    """Issue 42 #15: ``keys create`` stores a key through the running API; with
    no API answering (the README's first commands) it still prints the
    SETTLEQ_PRODUCER_KEYS lines, saying why, and so does ``--env``."""
    closed = "http://127.0.0.1:9"  # discard: nothing listens
    for args in (["--url", closed], ["--env"]):
        result = runner.invoke(
            app,
            ["keys", "create", "--partition", "V-A,1", "--key-id", "boot", *args],
            env={"SETTLEQ_CLIENT_TOKEN": "operator-token"},
        )
        assert result.exit_code == 0, result.output
        line = next(x for x in result.output.splitlines() if "SETTLEQ_PRODUCER_KEYS='" in x)
        [entry] = json.loads(line.split("=", 1)[1].strip("'"))
        assert entry["key_id"] == "boot" and entry["partitions"] == ["V-A,1"]
        assert all(x.startswith(("export SETTLEQ_", "#")) for x in result.output.splitlines())
    assert (
        "no API answers at http://127.0.0.1:9"
        in runner.invoke(
            app,
            ["keys", "create", "--partitions", "*", "--url", closed],
            env={"SETTLEQ_CLIENT_TOKEN": "operator-token"},
        ).output
    )
