"""``settleq partners`` and ``settleq edi ack`` against a running stack
(docs/api.md#trading-partners, #acknowledgements): a profile put, listed and
shown; an X12 file's 997 printed again later; refusals in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.cli import client_environ, run_settleq
from tests.support.factories import uid
from tests.support.infra import OPERATOR_TOKEN, PRODUCER_ID, VIEWER_TOKEN, ServiceEnv
from tests.support.stack import ROOT, Stack
from tests.support.x12_files import Freight, freight_contract, freight_file


def _cli(
    stack: Stack, env: ServiceEnv, *args: str, token: str = VIEWER_TOKEN, code: int = 0
) -> str:
    result = run_settleq([*args, "--url", stack.url], client_environ(env.queue_prefix, token=token))
    out = result.stdout + result.stderr
    assert result.returncode == code, out
    assert "Traceback" not in out
    if code == 1:  # a refusal: one line
        assert result.stderr.count("\n") == 1, result.stderr
    return result.stdout


def test_partners_put_list_show(stack: Stack, stack_env: ServiceEnv) -> None:
    sender = uid("MG")[:15].upper()
    put = ["partners", "put", "ZZ", sender, "--name", "Magic Catalyst", "--contract-version"]
    made = _cli(stack, stack_env, *put, "2", "--acknowledge", "errors_only", token=OPERATOR_TOKEN)
    assert f"created partner ZZ/{sender}" in made
    again = _cli(stack, stack_env, *put, "3", token=OPERATOR_TOKEN)
    assert "replaced" in again and "contract version 3" in again
    assert sender in _cli(stack, stack_env, "partners", "list")
    shown = _cli(stack, stack_env, "partners", "show", "ZZ", sender)
    assert "contract version: 3" in shown and "acknowledge: always" in shown
    assert "sent by: any producer key" in shown
    keyed = _cli(stack, stack_env, *put, "3", "--key-id", PRODUCER_ID, token=OPERATOR_TOKEN)
    assert "replaced" in keyed
    assert f"sent by: {PRODUCER_ID}" in _cli(stack, stack_env, "partners", "show", "ZZ", sender)
    _cli(stack, stack_env, "partners", "show", "ZZ", "NOBODY", code=1)
    _cli(stack, stack_env, *put, "1", code=1)  # a viewer's token: 403
    _cli(stack, stack_env, *put, "1", "--acknowledge", "sometimes", token=OPERATOR_TOKEN, code=2)


def test_a_payers_profile_is_put_and_shown(stack: Stack, stack_env: ServiceEnv) -> None:
    sender = uid("PY")[:15].upper()
    put = ["partners", "put", "ZZ", sender, "--name", "Big Mart", "--contract-version", "1"]
    payer = ["--payer-partition-key", "V-PAYER", "--tolerance-absolute", "1.00"]
    more = ["--tolerance-percent", "2", "--reason", "70=promotion", "--dispute-window-days", "0"]
    _cli(stack, stack_env, *put, *payer, *more, token=OPERATOR_TOKEN)
    shown = _cli(stack, stack_env, "partners", "show", "ZZ", sender)
    assert "payer of: V-PAYER" in shown and "reason codes: 70=promotion" in shown
    assert "tolerance: 1.00, 2% (the smaller)" in shown and "dispute window: 0 days" in shown
    _cli(stack, stack_env, *put, "--reason", "70", token=OPERATOR_TOKEN, code=2)
    refused = _cli(
        stack, stack_env, *put, "--tolerance-percent", "101", token=OPERATOR_TOKEN, code=1
    )
    assert refused == ""


def test_edi_ack_prints_a_jobs_997(stack: Stack, stack_env: ServiceEnv) -> None:
    carrier = uid("C").upper()[:8]
    operator = stack.operator()
    path = f"/v1/contracts/freight_audit/{carrier}/1"
    assert operator.bearer("PUT", path, freight_contract()).status_code == 201
    body = freight_file(Freight(uid("F"), carrier))
    answer: Any = stack.producer().submit(
        body, content_type="application/edi-x12", query={"contract_version": 1}
    )
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job_id"]
    printed = _cli(stack, stack_env, "edi", "ack", job_id)
    assert printed.startswith("997 accepting all 1 set(s):") and "AK5*A" in printed
    _cli(stack, stack_env, "edi", "ack", "0" * 32, code=1)


def test_submit_takes_an_x12_file_without_a_version_from_a_profiled_sender(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    carrier = uid("C").upper()[:8]
    path = f"/v1/contracts/freight_audit/{carrier}/1"
    assert stack.operator().bearer("PUT", path, freight_contract()).status_code == 201
    sender = uid("SB")[:15].upper()
    file = tmp_path / "invoice.edi"
    file.write_bytes(freight_file(Freight(uid("F"), carrier), sender=sender))
    env = client_environ(stack_env.queue_prefix)
    unknown = run_settleq(["submit", str(file), "--url", stack.url], env)
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "edi_partner_unknown" in unknown.stderr and "997 rejecting" in unknown.stderr
    _cli(
        stack, stack_env, "partners", "put", "ZZ", sender, "--name", "Test carrier",
        "--contract-version", "1", "--acknowledge", "errors_only", token=OPERATOR_TOKEN,
    )  # fmt: skip
    other = tmp_path / "other.edi"
    other.write_bytes(freight_file(Freight(uid("F"), carrier), sender=sender))
    done = run_settleq(["submit", str(other), "--wait", "--url", stack.url], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no 997: the partner's profile asks for none" in done.stdout
    # The profile names a version not published yet: the file is accepted, its
    # line waits in dead letters, and the partner's page says why in words.
    _cli(
        stack, stack_env, "partners", "put", "ZZ", sender, "--name", "Test carrier",
        "--contract-version", "2", token=OPERATOR_TOKEN,
    )  # fmt: skip
    later = tmp_path / "later.edi"
    later.write_bytes(freight_file(Freight(uid("F"), carrier), sender=sender))
    waiting = run_settleq(["submit", str(later), "--wait", "--url", stack.url], env)
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr  # dead-lettered lines
    shown = _cli(stack, stack_env, "partners", "show", "ZZ", sender)
    assert "files: 3 (1 refused, 33%)" in shown
    # The refusal in words, headed as the 997 it carried says.
    assert "(997 rejecting the interchange): sender ZZ/" in shown
    assert "1 line(s) wait in dead letters as unknown_contract_version" in shown
    assert "settleq contracts put KIND PARTITION 2 FILE" in shown
    listed = _cli(stack, stack_env, "partners", "list")
    assert sender in listed and "33%" in listed


def test_the_onboarding_runbook_onboards_the_real_210s_carrier(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    """docs/operations.md#onboarding-a-trading-partner, step by step, with the
    real 210 of tests/data/x12 and no query string: refused before the
    profile, one posted line at 659.40 after it, its 997 printed again."""
    file = str(ROOT / "tests" / "data" / "x12" / "210-MGCTLYST-SAMPLE.EDI")
    viewer = client_environ(stack_env.queue_prefix)
    operator = client_environ(stack_env.queue_prefix, token=OPERATOR_TOKEN)
    submit = ["submit", file, "--content-type", "application/edi-x12", "--wait"]
    before = run_settleq([*submit, "--url", stack.url], viewer)
    assert before.returncode == 1 and "edi_partner_unknown" in before.stderr
    contract = tmp_path / "contract.json"
    contract.write_text(
        '{"rates": {"cwt": "46.09"}, "discount_pct": "0.83", "fuel_surcharge": "0.0425",'
        ' "accessorials": {"CUS": "15.00"}, "tolerance": "1.00"}'
    )
    for args in (
        ["contracts", "put", "freight_audit", "SCAC", "1", str(contract)],
        ["partners", "put", "02", "SCAC", "--name", "SCAC carrier", "--contract-version", "1"],
    ):
        done = run_settleq([*args, "--url", stack.url], operator)
        assert done.returncode == 0, done.stdout + done.stderr
    after = run_settleq([*submit, "--url", stack.url], viewer)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "posted        │     1 │ 659.40" in after.stdout
    job_id = after.stdout.split("accepted job ", 1)[1].split(":", 1)[0]
    again = _cli(stack, stack_env, "edi", "ack", job_id)
    assert again.startswith("997 accepting all 1 set(s):")
