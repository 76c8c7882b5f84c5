"""Start-up checks (docs/operations.md#start-up-checks): ``settleq up``, ``api``,
``worker`` and ``relay`` refuse to start, in one line with the cause and the fix
and exit 1, a database they cannot reach or that is not migrated, a broker that
refuses their login (``broker_auth_failed``) or is not there, and no Redis.
Real services, real processes; nothing here reaches the supervisor."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infra import (
    BROKER_URL,
    PG_HOST,
    REDIS_URL,
    ServiceEnv,
    check_services,
    create_database,
    drop_database,
    isolated_env,
)

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ["up", "api", "worker", "relay"]


@pytest.fixture(scope="module")
def env_ok() -> Iterator[ServiceEnv]:
    """A migrated PostgreSQL database: the checks after it are the ones tested."""
    with isolated_env("boot") as env:
        yield env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(command: str, database_url: str, **overrides: str) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETTLEQ_")}
    env.update(
        PYTHONPATH=str(ROOT),
        SETTLEQ_DATABASE_URL=database_url,
        SETTLEQ_BROKER_URL=BROKER_URL,
        SETTLEQ_REDIS_URL=REDIS_URL,
        SETTLEQ_QUEUE_PREFIX=f"t{uuid.uuid4().hex[:10]}",  # nothing is declared anyway
        SETTLEQ_LOG_FORMAT="json",
    )
    env.update(overrides)
    argv = [sys.executable, "-m", "services.commands.cli", command]
    if command == "up":
        argv += ["--port", str(free_port())]
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr, time.monotonic() - started


def refusal(stderr: str) -> str:
    """The command's one line (the API's credential warnings aside)."""
    assert "Traceback" not in stderr, stderr
    lines = [x for x in stderr.splitlines() if x.startswith("settleq ")]
    assert len(lines) == 1, stderr
    others = [x for x in stderr.splitlines() if x and not x.startswith("settleq ")]
    assert all('"level": "warning"' in x.lower() or "WARNING" in x for x in others), stderr
    return lines[0]


@pytest.mark.parametrize("command", SERVERS)
def test_a_refused_broker_login_is_broker_auth_failed(env_ok: ServiceEnv, command: str) -> None:
    wrong = BROKER_URL.replace("guest:guest@", "guest:wrong@")
    code, stderr, took = run(command, env_ok.database_url, SETTLEQ_BROKER_URL=wrong)
    line = refusal(stderr)
    assert code == 1
    assert line.startswith(f"settleq {command}: broker_auth_failed: ")
    assert "SETTLEQ_BROKER_URL" in line and "wrong" not in line  # the password is ***
    assert took < 20


@pytest.mark.parametrize("command", ["up", "worker"])
def test_no_broker_at_all_is_broker_unreachable(env_ok: ServiceEnv, command: str) -> None:
    nowhere = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
    code, stderr, _ = run(command, env_ok.database_url, SETTLEQ_BROKER_URL=nowhere)
    assert code == 1
    assert refusal(stderr).startswith(f"settleq {command}: broker_unreachable: ")


@pytest.mark.parametrize("command", ["up", "api", "worker"])
def test_an_unreachable_redis_is_named(env_ok: ServiceEnv, command: str) -> None:
    nowhere = f"redis://127.0.0.1:{free_port()}/9"
    code, stderr, _ = run(command, env_ok.database_url, SETTLEQ_REDIS_URL=nowhere)
    line = refusal(stderr)
    assert code == 1
    assert line.startswith(f"settleq {command}: redis_unreachable: ")
    assert "SETTLEQ_REDIS_URL" in line


@pytest.mark.parametrize("command", SERVERS)
def test_an_unmigrated_database_says_run_migrate(command: str) -> None:
    check_services()
    name = f"settleq_test_empty_{uuid.uuid4().hex[:10]}"
    url = create_database(name)
    try:
        code, stderr, _ = run(command, url)
    finally:
        drop_database(name)
    line = refusal(stderr)
    assert code == 1
    assert line.startswith(f"settleq {command}: database_unmigrated: ")
    assert "has never been migrated" in line and "settleq migrate" in line


@pytest.mark.parametrize("command", ["up", "api", "migrate"])
def test_a_missing_database_is_unreachable_not_a_traceback(command: str) -> None:
    url = f"postgresql://postgres@{PG_HOST}:5432/settleq_test_missing_{uuid.uuid4().hex[:8]}"
    code, stderr, _ = run(command, url)
    line = refusal(stderr)
    assert code == 1
    assert line.startswith(f"settleq {command}: database_unreachable: ")


def test_supervised_children_leave_the_checks_to_their_parent() -> None:
    """`up` (and `worker --processes N`) checked before starting them: a child
    restarted during a short outage retries as before instead of exiting 1
    again and again until the supervisor reports it crash-looping."""
    from services.commands.cli import CHECKED, _worker_argv, stack_children
    from shared.config.settings import Settings

    children = stack_children(Settings(), 8000)
    assert {child.name for child in children} >= {"api", "relay"}
    assert all(CHECKED in child.argv for child in children)
    assert CHECKED in _worker_argv("fast_path", None, 0)
