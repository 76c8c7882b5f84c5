"""One machine, no settings: ``settleq up`` on the embedded SQLite ledger, driven
by the command line (docs/operations.md#settleq-up, docs/operations.md#commands; issue 7 items 4 and
6).

The stack runs in an empty directory with no ``SETTLEQ_DATABASE_URL``, so it
uses its default ``sqlite:///./settleq.db``, and ``up`` migrates it itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from shared.adapters.db.engine import make_engine
from shared.logs import STAGE_FIELDS
from tests.e2e.conftest import ARTIFACTS
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    PG_HOST,
    PRODUCER_ID,
    PRODUCER_SECRET,
    create_database,
    drop_database,
    isolated_sqlite_env,
)
from tests.support.ledger import ledger_rows
from tests.support.stack import ROOT, Stack, free_port, log_events

CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
# T1 at 0.125: 8 -> 1.00 and 16 -> 2.00 posted, 40 -> 5.00 claimed 6.00 disputed;
# T9 is no tier of the contract: that line alone is dead-lettered.
OUTCOMES = {"posted": 2, "disputed": 1, "duplicate": 0, "dead_lettered": 1}


def four_lines(vendor: str) -> list[dict[str, Any]]:
    return [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "40", "6.00")]),
        promo_doc(vendor, [promo_line(1, "16", "2.00"), promo_line(2, "8", "1.00", tier="T9")]),
    ]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("single-machine")


@pytest.fixture(scope="module")
def stack(home: Path) -> Iterator[Stack]:
    logs = ARTIFACTS / "logs" / "single_machine"
    logs.mkdir(parents=True, exist_ok=True)
    with isolated_sqlite_env(home) as env:
        running = Stack(env, logs, cwd=home, omit={"database_url"})
        try:
            running.start_up()
            yield running
        finally:
            running.stop()


@pytest.fixture(scope="module")
def ledger(stack: Stack, home: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{home / 'settleq.db'}")
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def vendor(stack: Stack) -> str:
    name = uid("SQ-")
    path = f"/v1/contracts/promo_accrual/{name}/1"
    assert stack.operator().bearer("PUT", path, CONTRACT).status_code == 201
    return name


def test_up_with_no_database_setting_settles_exactly_once_on_a_sqlite_file(
    stack: Stack, ledger: Engine, vendor: str, home: Path
) -> None:
    assert (home / "settleq.db").is_file()  # the default, created by `up` itself
    producer = stack.producer()
    body = json.dumps({"kind": "promo_accrual", "documents": four_lines(vendor)}).encode()
    first = producer.wait(producer.submit(body).json()["job_id"], timeout=60)
    assert first["state"] == "completed" and first["outcomes"] == OUTCOMES
    # The same text as on PostgreSQL (NUMERIC(20,4)): the backends are indistinguishable.
    assert first["amounts"] == {"posted": "3.00", "disputed": "6.00", "disputed_model": "5.00"}
    rows = ledger_rows(ledger, first["job_id"])
    assert sorted(r.amount for r in rows) == [Decimal("1.00"), Decimal("2.00"), Decimal("5.00")]
    # The same lines again, as a new submission: nothing is posted twice.
    again = producer.submit(body, idempotency_key=uid("again-")).json()["job_id"]
    second = producer.wait(again, timeout=60)
    assert second["outcomes"] == {"posted": 0, "disputed": 0, "duplicate": 3, "dead_lettered": 1}
    assert ledger_rows(ledger, again) == []
    events = [e for e in log_events(stack.log("up", tail=None)) if e.get("job_id") == again]
    stages = {e["stage"] for e in events}
    assert {"accept", "validate", "settle"} <= stages
    assert all(set(STAGE_FIELDS) <= set(e) for e in events)


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line as a user runs it, on a (pretend) terminal 120 columns wide."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "SETTLEQ_URL": stack.url,
        "SETTLEQ_CLIENT_KEY_ID": PRODUCER_ID,
        "SETTLEQ_CLIENT_SECRET": PRODUCER_SECRET,
        "TTY_COMPATIBLE": "1",  # rich renders its progress bar as on a terminal
        "COLUMNS": "120",
    }
    return subprocess.run(
        [sys.executable, "-m", "services.commands.cli", *args],
        env=env,
        cwd=stack.cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def plain(output: str) -> str:
    """Without the terminal's colours and cursor movements."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)


def table_rows(output: str) -> list[list[str]]:
    """The cells of each row of rich's tables (heavy bars in the header)."""
    lines = plain(output).replace("┃", "│").splitlines()
    return [
        [cell.strip() for cell in line.strip().strip("│").split("│")]
        for line in lines
        if line.count("│") >= 3  # a recipe's table has no amount columns
    ]


def test_submit_wait_shows_progress_and_prints_the_outcome_table(
    stack: Stack, vendor: str, home: Path
) -> None:
    batch = home / "batch.json"
    batch.write_text(json.dumps({"kind": "promo_accrual", "documents": four_lines(vendor)}))
    done = cli(stack, "submit", str(batch), "--wait")
    # 3: a line was dead-lettered, and the command says why (docs/operations.md#commands).
    assert done.returncode == 3, done.stdout + done.stderr
    out = plain(done.stdout)
    assert "settling" in out  # the progress bar's label
    assert "dead-lettered: 1 line(s)" in out and "unknown_promo_tier  1" in out
    [job_id] = re.findall(r"accepted job ([0-9a-f]{32}): 4 lines", out)
    assert f"job {job_id} (promo_accrual): completed" in out
    assert f"job {job_id} (promo_accrual): completed, 4 lines" in out
    # One row per outcome, amounts at the promo quantum (0.01): the model's, as
    # balances book them, and a disputed line's claim beside it.
    rows = table_rows(done.stdout)[-5:]
    assert rows == [
        ["outcome", "lines", "amount", "claimed"],
        ["posted", "2", "3.00", ""],
        ["disputed", "1", "5.00", "6.00"],
        ["duplicate", "0", "", ""],
        ["dead_lettered", "1", "", ""],
    ]
    shown = cli(stack, "status", job_id)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert table_rows(shown.stdout)[-5:] == rows


def test_submit_of_a_refused_batch_exits_non_zero(stack: Stack, home: Path) -> None:
    batch = home / "bad.json"
    batch.write_text(json.dumps({"kind": "promo_accrual", "documents": [], "extra": 1}))
    refused = cli(stack, "submit", str(batch), "--wait")
    assert refused.returncode == 1 and "422" in refused.stderr  # one line, on stderr


def test_demo_starts_a_stack_and_ends_with_an_outcome_table_per_kind(tmp_path: Path) -> None:
    """The README's first command (`make demo` runs `settleq demo --start-stack`),
    in an empty directory with no ledger setting; only its queues and Redis keys
    are isolated (and the port, which may be taken here)."""
    with isolated_sqlite_env(tmp_path) as env:
        environ = {
            **env.environ(omit={"database_url", "producer_keys", "operator_tokens"}),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "COLUMNS": "120",
        }
        url = f"http://127.0.0.1:{free_port()}"
        done = subprocess.run(
            [sys.executable, "-m", "services.commands.cli", "demo", "--start-stack", "--url", url]
            + ["--lines", "40"],
            env=environ,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
        )
    out = plain(done.stdout)
    assert done.returncode == 0, out + done.stderr + (tmp_path / "settleq-demo.log").read_text()
    for kind in ("promo_accrual", "recipe_cost", "freight_audit"):
        assert re.search(rf"job [0-9a-f]{{32}} \({kind}\): completed, 40 lines", out), out
    outcomes = ["outcome", "posted", "disputed", "duplicate", "dead_lettered"]
    assert [row[0] for row in table_rows(out)] == outcomes * 3
    assert (tmp_path / "settleq.db").is_file() and (tmp_path / "settleq-demo.log").is_file()
    # Its credentials are kept (owner only), so its jobs can be looked at afterwards.
    creds = tmp_path / "settleq-demo-credentials.env"
    assert creds.stat().st_mode & 0o777 == 0o600
    names = {line.split("=", 1)[0] for line in creds.read_text().splitlines() if "=" in line}
    assert {"SETTLEQ_PRODUCER_KEYS", "SETTLEQ_OPERATOR_TOKENS", "SETTLEQ_CLIENT_TOKEN"} <= names
    assert str(creds) in out and f"{url}/dashboard" in out


@pytest.mark.regression
@pytest.mark.parametrize("database", ["missing", "unmigrated"])
def test_up_on_a_database_it_cannot_use_says_so_in_one_line_and_exits_1(
    database: str, tmp_path: Path
) -> None:
    """Supervision made this worse before it made it better: every child died on
    the database, was restarted and died again, thousands of traceback lines,
    then exit 1. ``up`` now checks the database first."""
    name = f"settleq_up_{database}_{uid('')[:8]}".lower()
    if database == "unmigrated":
        create_database(name)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SETTLEQ_")}
        env["SETTLEQ_DATABASE_URL"] = f"postgresql://postgres@{PG_HOST}:5432/{name}"
        env["PYTHONPATH"] = str(ROOT)
        done = subprocess.run(
            [sys.executable, "-m", "services.commands.cli", "up", "--port", str(free_port())],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        if database == "unmigrated":
            drop_database(name)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("settleq up: "), output
    expected = "cannot reach the database" if database == "missing" else "run `settleq migrate`"
    assert expected in lines[0], output
