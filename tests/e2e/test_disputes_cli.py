"""``settleq disputes`` against a running stack (docs/operations.md#disputes):
list, show, stats, the CSV export, resolving one and the bulk write-off, and
a refusal printed on one line with exit code 1."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import Engine

from services.api.disputes.export import HEADER
from tests.support.dispute_jobs import VARIANCES, promo_lines, resolved_rows
from tests.support.factories import promo_doc, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN
from tests.support.stack import ROOT, Stack


def settleq(stack: Stack, token: str, *args: str, code: int = 0) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "services.commands.cli", "disputes", *args, "--url", stack.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "SETTLEQ_CLIENT_TOKEN": token},
    )
    assert result.returncode == code, result.stdout + result.stderr
    # A refusal is one line on stderr (services/commands/errors.py).
    return result.stdout if code == 0 else result.stderr


def test_the_dispute_workflow_from_the_command_line(
    stack: Stack, engine: Engine, tmp_path: Path
) -> None:
    vendor = uid("CLI-")
    contract = f"/v1/contracts/promo_accrual/{vendor}/1"
    body = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
    assert stack.operator().bearer("PUT", contract, body).status_code == 201
    batch = {"kind": "promo_accrual", "documents": [promo_doc(vendor, promo_lines())]}
    accepted = stack.producer().submit(json.dumps(batch).encode())
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    assert stack.producer().wait(job_id, timeout=60)["state"] == "completed"

    listed = settleq(stack, VIEWER_TOKEN, "list", "--job", job_id)
    assert listed.count(vendor) == 4 and "open" in listed
    page = stack.viewer().bearer("GET", f"/v1/disputes?job_id={job_id}").json()
    refs = {d["line_ref"]: d["id"] for d in page["items"]}
    # Line 2 (variance 1.00) is decided alone; 3 and 5 (0.50, 0.30) are written off; 4 stays.
    ids = [refs["2"], refs["3"], refs["5"], refs["4"]]
    shown = json.loads(settleq(stack, VIEWER_TOKEN, "show", str(ids[0])))
    assert shown["id"] == ids[0] and shown["status"] == "open" and shown["line_ref"] == "2"
    assert "partitions with the largest open variance" in settleq(stack, VIEWER_TOKEN, "stats")

    export = tmp_path / "disputes.csv"
    assert "wrote" in settleq(stack, VIEWER_TOKEN, "list", "--job", job_id, "--csv", str(export))
    with export.open(newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == HEADER and len(rows) == 5
    assert {r[5] for r in rows[1:]} == set(VARIANCES)
    to_stdout = settleq(stack, VIEWER_TOKEN, "list", "--partition", vendor, "--csv", "-")
    assert to_stdout.splitlines()[0] == ",".join(HEADER)

    # A viewer may read but not resolve: one line, exit 1, nothing written.
    refused = settleq(
        stack,
        VIEWER_TOKEN,
        "resolve",
        str(ids[0]),
        "--decision",
        "accept_claim",
        "--note",
        "x",
        code=1,
    )
    assert "403" in refused and "forbidden" in refused and VIEWER_TOKEN not in refused
    assert resolved_rows(engine, ids[0]) == 0

    one = settleq(
        stack,
        OPERATOR_TOKEN,
        "resolve",
        str(ids[0]),
        "--decision",
        "settle_at",
        "--amount",
        "5.50",
        "--note",
        "agreed with the vendor",
    )
    assert f"dispute {ids[0]}: settle_at at 5.50" in one
    conflict = settleq(
        stack,
        OPERATOR_TOKEN,
        "resolve",
        str(ids[0]),
        "--decision",
        "accept_claim",
        "--note",
        "x",
        code=1,
    )
    assert "409" in conflict and "dispute_already_resolved" in conflict

    # The weekly write-off: everything under a dollar of this vendor's, at the claim.
    bulk = settleq(
        stack,
        OPERATOR_TOKEN,
        "resolve",
        "--all",
        "--partition",
        vendor,
        "--max-abs-variance",
        "0.99",
        "--limit",
        "10000",
        "--decision",
        "accept_claim",
        "--note",
        "weekly write-off under $1",
    )
    assert "resolved 2" in bulk
    resolved = settleq(stack, VIEWER_TOKEN, "list", "--job", job_id, "--status", "resolved")
    assert resolved.count(vendor) == 3
    assert settleq(stack, VIEWER_TOKEN, "list", "--job", job_id).count(vendor) == 1
    assert all(resolved_rows(engine, i) == 1 for i in ids[:3])
