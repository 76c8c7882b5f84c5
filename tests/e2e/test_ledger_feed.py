"""The ledger feed over HTTP against a running stack (docs/api.md#the-ledger-feed):
a poller with a small limit races concurrent jobs settled by two settling
workers across several partitions, a re-pricing and resolutions; the union of
what it received is the ledger, none twice, each row after the one it
supersedes. Then ``settleq ledger feed`` reads it whole, resumes from the cursor
it printed, and prints its cursor when Ctrl-C stops ``--follow``."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, select

from shared.adapters.db import tables
from tests.support.cli import SETTLEQ, client_environ, hears_ctrl_c
from tests.support.dispute_jobs import LINES
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.stack import ROOT, Stack

DEADLINE_S = 180.0


def _contracts(stack: Stack, vendors: list[str]) -> None:
    for vendor in vendors:
        for version, rate in ((1, "0.125"), (2, "0.150")):
            body = {"tier_rates": {"T1": rate}, "tolerance": "0.05"}
            path = f"/v1/contracts/promo_accrual/{vendor}/{version}"
            assert stack.operator().bearer("PUT", path, body).status_code in (200, 201)


def _submit(stack: Stack, documents: list[dict[str, Any]]) -> str:
    batch = {"kind": "promo_accrual", "documents": documents}
    accepted = stack.producer().submit(json.dumps(batch).encode())
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["job_id"])


class Poller(threading.Thread):
    """A consumer over HTTP: ``limit`` 7, ``wait`` 1, always from the last cursor."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True)
        self.http = stack.viewer()
        self.cursor = self.http.bearer("GET", "/v1/ledger/feed?after=now").json()["next_cursor"]
        self.items: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.failure: str | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                answer = self.http.bearer(
                    "GET", f"/v1/ledger/feed?after={self.cursor}&limit=7&wait=1"
                )
            except httpx.TransportError as exc:  # the stack stopped under it
                self.failure = repr(exc)
                return
            if answer.status_code != 200:
                self.failure = f"{answer.status_code} {answer.text}"
                return
            page = answer.json()
            self.items += page["items"]
            self.cursor = page["next_cursor"]


def test_a_poller_racing_concurrent_jobs_receives_the_ledger_once(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    stack.start_worker("compute_heavy", name="compute_heavy_2")  # two settling workers
    vendors = [uid("FEEDE-") for _ in range(4)]
    _contracts(stack, vendors)
    poller = Poller(stack)
    poller.start()
    try:
        _race(stack, engine, vendors, poller)
    finally:
        poller.stop.set()
        poller.join(timeout=30)
    _cli(stack, engine, vendors, tmp_path)


def _race(stack: Stack, engine: Engine, vendors: list[str], poller: Poller) -> None:
    firsts = [promo_doc(v, [promo_line(n, u, c) for n, u, c in LINES]) for v in vendors]
    bulk = [
        promo_doc(vendors[i % 4], [promo_line(n, str(2 + n), "0.40") for n in range(1, 40)])
        for i in range(12)
    ]
    jobs = [_submit(stack, firsts)]
    submitters = [
        threading.Thread(target=lambda part=part: jobs.append(_submit(stack, part)))
        for part in (bulk[:4], bulk[4:8], bulk[8:])
    ]
    for s in submitters:
        s.start()
    for s in submitters:
        s.join()
    assert stack.producer().wait(jobs[0], timeout=DEADLINE_S)["state"] == "completed"
    # Re-priced at version 2 while the others settle: rows that supersede.
    jobs.append(_submit(stack, [{**d, "contract_version": 2} for d in firsts[:2]]))
    disputes = stack.viewer().bearer("GET", f"/v1/disputes?job_id={jobs[0]}").json()["items"]
    # Of the documents not re-priced: a re-priced line's dispute is superseded.
    for dispute in [d for d in disputes if d["partition_key"] in vendors[2:]][:2]:
        decided = stack.operator().bearer(
            "POST",
            f"/admin/disputes/{dispute['id']}/resolve",
            {"decision": "accept_model", "note": "feed test"},
        )
        assert decided.status_code in (200, 201), decided.text
    for job_id in jobs:
        assert stack.producer().wait(job_id, timeout=DEADLINE_S)["state"] == "completed"

    with engine.connect() as conn:
        ledger = list(conn.execute(select(tables.ledger_entries.c.id)).scalars())
    deadline = time.monotonic() + DEADLINE_S
    while len(poller.items) < len(ledger) and time.monotonic() < deadline:
        assert poller.failure is None, poller.failure
        time.sleep(0.2)
    received = [i["id"] for i in poller.items]
    assert len(received) == len(set(received)), "a row came twice"
    assert sorted(received) == sorted(ledger)
    outcomes = {i["outcome"] for i in poller.items}
    assert outcomes == {"posted", "disputed", "resolved"}
    seen: set[int] = set()
    for item in poller.items:
        assert item["supersedes_id"] is None or item["supersedes_id"] in seen, item
        seen.add(item["id"])
    assert sum(i["supersedes_id"] is not None for i in poller.items) >= 2 + 10  # resolved, v2


def _cli(stack: Stack, engine: Engine, vendors: list[str], tmp_path: Path) -> None:
    """The CLI reads the ledger whole, then resumes from the cursor it printed:
    nothing more; following, it prints a new row as it commits, and its cursor on Ctrl-C."""
    with engine.connect() as conn:
        ledger = list(conn.execute(select(tables.ledger_entries.c.id)).scalars())
    env = client_environ(stack.env.queue_prefix)
    export = tmp_path / "ledger.csv"
    whole = subprocess.run(
        [*SETTLEQ, "ledger", "feed", "--csv", str(export), "--url", stack.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert whole.returncode == 0, whole.stderr
    with export.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(int(r["id"]) for r in rows) == sorted(ledger)
    assert f"{len(ledger)} rows written" in whole.stderr
    cursor = whole.stderr.rsplit("--after ", 1)[1].split()[0]
    again = subprocess.run(
        [*SETTLEQ, "ledger", "feed", "--after", cursor, "--url", stack.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert again.returncode == 0 and again.stderr.startswith("0 rows"), again.stderr

    follow = subprocess.Popen(
        [*SETTLEQ, "ledger", "feed", "--follow", "--after", cursor, "--url", stack.url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=hears_ctrl_c,
    )
    vendor = vendors[0]
    job_id = _submit(stack, [promo_doc(vendor, [promo_line(1, "8", "1.00")])])
    assert stack.producer().wait(job_id, timeout=DEADLINE_S)["state"] == "completed"
    assert follow.stdout is not None
    line = follow.stdout.readline()  # the new row, printed as it commits
    assert job_id in line and vendor in line
    follow.send_signal(signal.SIGINT)
    _, stderr = follow.communicate(timeout=60)
    assert follow.returncode == 130, stderr
    assert "1 rows; resume with --after " in stderr
