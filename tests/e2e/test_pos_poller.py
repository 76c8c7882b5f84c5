"""The POS poller of docs/api.md#a-pos-poller, run as written (its code is taken
from the docs, so that the two cannot drift) against a running stack: killed
with SIGKILL three times while recipe_cost jobs settle, it resumes each time
from the state it saved, and in the end has applied every row of its location
once, none of another's (issue 52 items 3 and 4). ``settleq ledger feed
--line-ref`` then reads the same rows."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from shared.adapters.db import tables
from tests.support.cli import client_environ, run_settleq
from tests.support.factories import uid
from tests.support.stack import ROOT, Stack

DEADLINE_S = 180.0
# Each job settles as several units, so that a kill can fall between them.
STACK_SETTINGS = {"max_chunk_documents": 2}
STORE, OTHER = "STORE-0042", "STORE-0007"
KILLS = 3


def poller_code() -> str:
    """The docs' poller, as a reader copies it."""
    section = (ROOT / "docs" / "api.md").read_text().split("### A POS poller", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0]


def _request(recipe: str, round_no: int, n: int) -> dict[str, Any]:
    return {
        "document_id": uid("RQ-"),
        "partition_key": recipe,
        "contract_version": 1,
        "recipe_id": recipe,
        "location_ids": [STORE, OTHER],
        # Each round effective later: it re-prices the round before.
        "effective_at": f"2026-0{round_no + 1}-01T00:00:00Z",
        "pricing_snapshot": {"FLOUR": f"{3 + round_no}.{n + 1:02d}"},
        "trigger": "vendor_rate",
    }


class Terminal:
    """The poller's process, restarted in the same directory (its state file)."""

    def __init__(self, script: Path, env: dict[str, str]) -> None:
        self.script, self.env = script, env
        self.log = script.with_suffix(".log")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(self.script)],
                cwd=self.script.parent,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def state(self) -> dict[str, Any] | None:
        path = self.script.parent / "feed-state.json"
        try:
            state: dict[str, Any] = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # not saved yet (or, saved in place, caught mid-write)
        return state

    def wait_rows(self, done: Any) -> dict[str, Any]:
        """Until its saved state's rows satisfy ``done``; that state."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"the poller exited:\n{self.log.read_text()[-3000:]}")
            state = self.state()
            if state is not None and done(state["rows"]):
                return state
            assert time.monotonic() < deadline, (state, self.log.read_text()[-3000:])
            time.sleep(0.05)


def _submit(stack: Stack, recipes: list[str], round_no: int) -> str:
    documents = [_request(r, round_no, n) for n, r in enumerate(recipes)]
    body = json.dumps({"kind": "recipe_cost", "documents": documents}).encode()
    accepted = stack.producer().submit(body)
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["job_id"])


def test_the_docs_pos_poller_killed_three_times_applies_each_row_of_its_store_once(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    recipes = [uid("RECIPE-") for _ in range(6)]
    for recipe in recipes:
        path = f"/v1/contracts/recipe_cost/{recipe}/1"
        answer = stack.operator().bearer("PUT", path, {"bom": {"FLOUR": "2"}})
        assert answer.status_code in (200, 201), answer.text
    script = tmp_path / "pos_poller.py"
    script.write_text(poller_code())
    env = {**client_environ(stack.env.queue_prefix), "SETTLEQ_URL": stack.url}
    terminal = Terminal(script, env)
    terminal.start()
    jobs: list[str] = []
    applied = 0
    for round_no in range(KILLS):
        jobs.append(_submit(stack, recipes, round_no))
        # Killed once it has saved some of this round's rows, while the rest settle.
        applied = terminal.wait_rows(lambda rows, before=applied: rows > before)["rows"]
        terminal.kill()
        terminal.start()
    jobs.append(_submit(stack, recipes, KILLS))
    for job_id in jobs:
        assert stack.producer().wait(job_id, timeout=DEADLINE_S)["state"] == "completed"

    ledger = tables.ledger_entries
    with engine.connect() as conn:
        query = select(ledger.c.id, ledger.c.partition_key, ledger.c.delta, ledger.c.line_ref)
        rows = conn.execute(query.where(ledger.c.job_id.in_(jobs))).all()
    mine = [r for r in rows if r.line_ref == STORE]
    assert len(mine) == len(recipes) * (KILLS + 1) and len(rows) == 2 * len(mine)
    costs: dict[str, Decimal] = defaultdict(Decimal)
    for row in mine:
        costs[row.partition_key] += row.delta
    state = terminal.wait_rows(lambda count: count >= len(mine))
    terminal.kill()
    assert state["rows"] == len(mine)  # none twice, none missed ...
    assert {k: Decimal(v) for k, v in state["costs"].items()} == costs  # ... and each its own

    cli = run_settleq(
        ["ledger", "feed", "--line-ref", STORE, "--csv", "-", "--url", stack.url], env
    )
    assert cli.returncode == 0, cli.stderr
    read = list(csv.DictReader(io.StringIO(cli.stdout)))
    assert sorted(int(r["id"]) for r in read) == sorted(r.id for r in mine)
