"""The client commands against a running stack say why (docs/operations.md#commands,
issue 29 items 9, 10 and 16): a refusal names where each problem is, as the API
said it; ``submit --wait`` exits 3 with the reasons of its dead-lettered lines
and the ``dlq list --job-id`` line to see them, and 130 on Ctrl-C with how to
follow the job that goes on; one flag name each, the other kept as an alias."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import SETTLEQ, client_environ, hears_ctrl_c, run_settleq
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN, SCOPED_ID, SCOPED_SECRET, ServiceEnv
from tests.support.stack import ROOT, Stack

pytestmark = pytest.mark.e2e
CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}


def settleq(
    stack: Stack, stack_env: ServiceEnv, *args: str, code: int, stdin: str = "", **who: str
) -> subprocess.CompletedProcess[str]:
    env = client_environ(stack_env.queue_prefix, **who)
    done = run_settleq([*args, "--url", stack.url], env, stdin)
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done


def refusal(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The refusal's lines: every line of stderr says ``settleq: <status> <code>: ...``."""
    lines = done.stderr.splitlines()
    assert lines and all(re.match(r"settleq: \d{3} \w+: ", line) for line in lines), lines
    return lines


def vendor_with_contract(stack: Stack) -> str:
    vendor = uid("WHY-")
    put = stack.operator().bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
    assert put.status_code == 201, put.text
    return vendor


@pytest.mark.regression
def test_a_refusal_says_where_each_problem_is(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    vendor = vendor_with_contract(stack)
    good = json.dumps(promo_doc(vendor, [promo_line(1, "8", "1.00")]))
    header = json.dumps({"kind": "promo_accrual"})

    # Bad JSON on the third NDJSON line: the line the API names, not the column.
    broken = f'{header}\n{good}\n{good[:-1]}, "x": }}\n'
    lines = refusal(settleq(stack, stack_env, "submit", "-", code=1, stdin=broken))
    assert len(lines) == 1 and lines[0].startswith("settleq: 422 json_invalid: line 3: "), lines
    # ... and the API's message no longer contradicts it with its parser's "line 1".
    assert "line 1 column" not in lines[0] and "at column " in lines[0], lines

    # An unknown field, in a JSON batch and on an NDJSON line: the field is named.
    doc = {**json.loads(good), "bogus": 1}
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"kind": "promo_accrual", "documents": [doc]}))
    lines = refusal(settleq(stack, stack_env, "submit", str(batch), code=1))
    assert lines == [
        "settleq: 422 extra_forbidden: documents[0].bogus: Extra inputs are not permitted"
    ]
    lines = refusal(
        settleq(stack, stack_env, "submit", "-", code=1, stdin=f"{header}\n{json.dumps(doc)}\n")
    )
    assert lines == ["settleq: 422 extra_forbidden: line 2, bogus: Extra inputs are not permitted"]

    # A contract without a field its kind needs.
    put = ["contracts", "put", "promo_accrual", uid("WHY-"), "1", "-"]
    done = settleq(
        stack, stack_env, *put, code=1, stdin='{"tolerance": "0.05"}', token=OPERATOR_TOKEN
    )
    assert refusal(done) == ["settleq: 422 missing: tier_rates: Field required"]

    # A key scoped to other partitions: the partition is named.
    scoped = {"key_id": SCOPED_ID, "secret": SCOPED_SECRET}
    done = settleq(stack, stack_env, "submit", "-", code=1, stdin=f"{header}\n{good}\n", **scoped)
    [line] = refusal(done)
    assert line.startswith(f"settleq: 403 partition_not_allowed: partition_key {vendor}: "), line


@pytest.mark.regression
def test_submit_wait_with_dead_letters_exits_3_saying_why(
    stack: Stack, stack_env: ServiceEnv
) -> None:
    vendor = vendor_with_contract(stack)
    documents = [
        promo_doc(vendor, [promo_line(1, "8", "1.00")]),  # posted
        promo_doc(vendor, [promo_line(n, "8", "1.00") for n in (1, 2)], version=9),  # no contract
        promo_doc(vendor, [promo_line(1, "8", "1.00", tier="T9")]),  # a tier it does not price
    ]
    ndjson = "".join(json.dumps(d) + "\n" for d in [{"kind": "promo_accrual"}, *documents])
    done = settleq(stack, stack_env, "submit", "-", "--wait", code=3, stdin=ndjson)
    job_id = done.stdout.split("accepted job ")[1].split(":")[0]
    out = done.stdout
    assert "dead-lettered: 3 line(s)" in out, out
    reasons = {m[1]: int(m[2]) for m in re.finditer(r"^  (\w+) +(\d+)$", out, flags=re.MULTILINE)}
    assert reasons == {"unknown_contract_version": 2, "unknown_promo_tier": 1}, out
    assert f"settleq dlq list --job-id {job_id}" in out

    # That line, as printed (and its alias): the job's dead letters, both reasons.
    for flag in ("--job-id", "--job"):
        listed = settleq(
            stack, stack_env, "dlq", "list", flag, job_id, code=0, token=OPERATOR_TOKEN
        )
        assert "unknown_contract_version" in listed.stdout
        assert "unknown_promo_tier" in listed.stdout

    # A job without dead letters is 0, as before.
    clean = "".join(json.dumps(d) + "\n" for d in [{"kind": "promo_accrual"}, documents[0]])
    fresh = clean.replace(documents[0]["document_id"], uid("INV-"))
    assert (
        "dead-lettered"
        not in settleq(stack, stack_env, "submit", "-", "--wait", code=0, stdin=fresh).stdout
    )


@pytest.mark.regression
def test_ctrl_c_during_wait_says_the_job_goes_on(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    vendor = vendor_with_contract(stack)
    batch = tmp_path / "claims.json"
    document = promo_doc(vendor, [promo_line(1, "8", "1.00")])
    batch.write_text(json.dumps({"kind": "promo_accrual", "documents": [document]}))
    stack.stop_one("compute_heavy")  # the job cannot finish while nothing settles it
    try:
        waiting = subprocess.Popen(
            [*SETTLEQ, "submit", str(batch), "--wait", "--url", stack.url],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=client_environ(stack_env.queue_prefix),
            preexec_fn=hears_ctrl_c,
        )
        assert waiting.stdout is not None
        accepted = waiting.stdout.readline()  # it waits once the job is accepted
        job_id = accepted.split("accepted job ")[1].split(":")[0]
        time.sleep(0.5)
        waiting.send_signal(signal.SIGINT)
        out, err = waiting.communicate(timeout=30)
    finally:
        stack.start_worker("compute_heavy")
    assert waiting.returncode == 130, accepted + out + err
    assert "Traceback" not in out + err
    assert f"job {job_id} goes on" in err and f"settleq status {job_id}" in err, err
    # It did go on: settled once a worker is back.
    assert stack.producer().wait(job_id, timeout=60)["state"] == "completed"


@pytest.mark.regression
def test_filters_take_the_apis_names_and_the_old_ones(stack: Stack, stack_env: ServiceEnv) -> None:
    vendor = vendor_with_contract(stack)
    disputed = promo_doc(vendor, [promo_line(1, "8", "9.00")])  # 8 x 0.125 is 1.00
    batch = json.dumps({"kind": "promo_accrual", "documents": [disputed]}).encode()
    accepted = stack.producer().submit(batch)
    assert accepted.status_code == 202, accepted.text
    job_id = accepted.json()["job_id"]
    assert stack.producer().wait(job_id, timeout=60)["state"] == "completed"
    for args in (
        ["disputes", "list", "--job-id", job_id],
        ["disputes", "list", "--job", job_id],
        ["disputes", "list", "--partition-key", vendor],
        ["disputes", "list", "--partition", vendor],
        ["jobs", "list", "--partition-key", vendor],
        ["jobs", "list", "--partition", vendor],
    ):
        shown = settleq(stack, stack_env, *args, code=0).stdout
        assert (job_id if args[0] == "jobs" else vendor) in shown, (args, shown)
