"""The client commands against a running stack, so nobody needs curl (issue 15,
items 2 and 3): contracts put/get/list, NDJSON on stdin, the resubmission
message, jobs list/lines (--csv), audit list, dlq list --kind, the "more:"
hint, a 404 on one line, and ``events tail`` on the stack's events exchange."""

from __future__ import annotations

import csv
import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import client_environ, hears_ctrl_c
from tests.support.dispute_jobs import VARIANCES, promo_lines
from tests.support.factories import promo_doc, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv
from tests.support.stack import ROOT, Stack

CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}


def environ(stack_env: ServiceEnv, token: str = VIEWER_TOKEN) -> dict[str, str]:
    return client_environ(stack_env.queue_prefix, token)


def settleq(
    stack: Stack,
    stack_env: ServiceEnv,
    *args: str,
    token: str = VIEWER_TOKEN,
    stdin: str = "",
    code: int = 0,
) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "services.commands.cli", *args, "--url", stack.url],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ(stack_env, token),
    )
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    if code:
        assert result.stderr.count("\n") == 1, result.stderr
        return result.stderr
    return result.stdout


def start_tail(stack_env: ServiceEnv, count: int) -> subprocess.Popen[str]:
    tail = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "services.commands.cli",
            "events",
            "tail",
            "--json",
            "--count",
            str(count),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ(stack_env),
        preexec_fn=hears_ctrl_c,
    )
    assert tail.stderr is not None
    deadline = time.monotonic() + 30
    while "tailing" not in tail.stderr.readline():  # bound once it says so
        assert time.monotonic() < deadline and tail.poll() is None, "events tail did not start"
    return tail


def test_the_operator_workflow_without_curl(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    vendor = uid("CLIC-")
    op = {"token": OPERATOR_TOKEN}
    listed = settleq(stack, stack_env, "contracts", "list", "promo_accrual", vendor, **op)
    assert "no versions" in listed
    body = tmp_path / "contract.json"
    body.write_text(json.dumps(CONTRACT))
    put = ["contracts", "put", "promo_accrual", vendor, "1"]
    assert "published promo_accrual" in settleq(stack, stack_env, *put, str(body), **op)
    again = settleq(stack, stack_env, *put, "-", stdin=json.dumps(CONTRACT), **op)
    assert "already published, identical" in again
    got = json.loads(
        settleq(stack, stack_env, "contracts", "get", "promo_accrual", vendor, "1", **op)
    )
    assert got["body"]["tier_rates"] == {"T1": "0.125"}
    assert vendor in settleq(stack, stack_env, "contracts", "list", "promo_accrual", vendor, **op)
    refused = settleq(stack, stack_env, *put, str(body), code=1)  # a viewer may not publish
    assert "403" in refused and VIEWER_TOKEN not in refused

    lines = promo_lines()
    stack._spawn("relay", ["relay"])
    tail = start_tail(stack_env, len(lines))
    ndjson = json.dumps({"kind": "promo_accrual"}) + "\n"
    ndjson += json.dumps(promo_doc(vendor, lines)) + "\n"
    accepted = settleq(stack, stack_env, "submit", "-", "--wait", stdin=ndjson)
    job_id = accepted.split("accepted job ")[1].split(":")[0]
    assert "disputed" in accepted and "posted" in accepted
    resubmitted = settleq(stack, stack_env, "submit", "-", stdin=ndjson)
    assert f"already submitted as job {job_id}" in resubmitted

    out, err = tail.communicate(timeout=60)
    assert tail.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert len(events) == len(lines) and {e["job_id"] for e in events} == {job_id}

    missing = settleq(stack, stack_env, "status", "nonexistent", code=1)
    assert "404 job_not_found" in missing
    jobs = settleq(stack, stack_env, "jobs", "list", "--limit", "1")
    assert job_id in jobs and "more: --cursor " in jobs
    cursor = jobs.split("more: --cursor ")[1].split()[0]
    settleq(stack, stack_env, "jobs", "list", "--limit", "1", "--cursor", cursor)
    table = settleq(stack, stack_env, "jobs", "lines", job_id, "--outcome", "disputed")
    assert "disputed" in table and "open" in table
    export = tmp_path / "disputed.csv"
    wrote = settleq(
        stack, stack_env, "jobs", "lines", job_id, "--outcome", "disputed", "--csv", str(export)
    )
    assert f"({len(VARIANCES)} lines)" in wrote
    with export.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["line_ref"] for r in rows} == set(VARIANCES)
    assert all("," not in r["delta"] and r["outcome"] == "disputed" for r in rows)
    # The server's export (GET /v1/jobs/{id}/lines.csv), with each dispute's status.
    assert all(r["dispute_status"] == "open" for r in rows)
    # On a terminal (script(1) gives it one) the export shows its progress in rows;
    # the file holds the CSV alone (issue 29 item 15).
    on_tty = tmp_path / "tty.csv"
    command = [
        sys.executable,
        "-m",
        "services.commands.cli",
        "jobs",
        "lines",
        job_id,
        "--url",
        stack.url,
    ]
    shown = subprocess.run(
        ["script", "-qec", shlex.join([*command, "--csv", str(on_tty)]), "/dev/null"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ(stack_env),
    )
    assert shown.returncode == 0, shown.stdout
    assert f"job {job_id} lines" in shown.stdout and "rows" in shown.stdout, shown.stdout
    assert on_tty.read_text().startswith("document_id,")

    dlq = settleq(stack, stack_env, "dlq", "list", "--kind", "promo_accrual", **op)
    assert "dead letters" in dlq
    page = stack.viewer().bearer("GET", f"/v1/disputes?job_id={job_id}").json()
    dispute = str(page["items"][0]["id"])
    resolve = ["disputes", "resolve", dispute, "--decision", "accept_claim", "--note", "cli"]
    settleq(stack, stack_env, *resolve, **op)
    audit = settleq(stack, stack_env, "audit", "list", "--limit", "1", **op)
    assert "resolve" in audit and "more: --cursor" in audit


@pytest.mark.regression
def test_events_tail_stops_on_ctrl_c_with_exit_130(stack_env: ServiceEnv) -> None:
    """Issue 52 item 11: it exited 0 where ``ledger feed --follow`` exits 130, the
    shell's convention for a command interrupted: one behaviour for both."""
    tail = start_tail(stack_env, 0)
    tail.send_signal(signal.SIGINT)
    out, err = tail.communicate(timeout=30)
    assert tail.returncode == 130 and "Traceback" not in out + err, err


def test_remittances_and_deductions_from_the_command_line(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    """``settleq remittances`` and ``settleq deductions`` as a user runs them: a
    JSON remittance signed and sent, listed, its deduction decided, a refusal
    on one line (docs/operations.md#remittances-and-deductions)."""
    vendor = uid("CLIR-")
    body = tmp_path / "remittance.json"
    body.write_text(
        json.dumps(
            {
                "trace": uid("TR"),
                "paid_total": "0.00",
                "currency": "USD",
                "paid_at": "2026-12-01",
                "adjustments": [{"amount": "-12.00", "reason_code": "22", "reference": "F-1"}],
            }
        )
    )
    sent = settleq(stack, stack_env, "remittances", "submit", str(body), "--partition", vendor)
    assert "received remittance rm_" in sent and "disputed 12.00" in sent
    remittance_id = sent.split("received remittance ")[1].split()[0]
    assert remittance_id in settleq(stack, stack_env, "remittances", "list", "--partition", vendor)
    page = json.loads(
        settleq(stack, stack_env, "deductions", "list", "--partition", vendor, "--json")
    )
    [deduction] = page["deductions"]
    assert (deduction["status"], deduction["reference"]) == ("disputed", "F-1")
    decide = ["deductions", "decide", str(deduction["id"])]
    op = {"token": OPERATOR_TOKEN}
    decided = settleq(stack, stack_env, *decide, "--accept", "--note", "freight ok", **op)
    assert f"deduction {deduction['id']}: accept" in decided
    refused = settleq(stack, stack_env, *decide, "--deny", "--note", "no", code=1, **op)
    assert "409 deduction_already_decided" in refused
    aging = settleq(stack, stack_env, "deductions", "aging", "--partition", vendor)
    assert "open deductions as of" in aging
    shown = settleq(stack, stack_env, "remittances", "show", remittance_id)
    assert "written_off" in shown and "F-1" in shown
