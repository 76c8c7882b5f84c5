"""``settleq keys`` against a running stack (docs/operations.md#credentials):
a key created, scoped, rotated and revoked while the stack runs counts within
seconds, without a restart; ``keys create --env`` still prints the bootstrap
lines the README's first commands paste."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from services.commands.client import Client
from shared.domain.synthetic import promo_contract
from tests.support.cli import client_environ, run_settleq
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN, ServiceEnv
from tests.support.stack import Stack

WITHIN_S = 5.0


def _keys(stack: Stack, env: ServiceEnv, *args: str, code: int = 0) -> str:
    environ = client_environ(env.queue_prefix, token=OPERATOR_TOKEN)
    result = run_settleq(["keys", *args, "--url", stack.url], environ)
    out = result.stdout + result.stderr
    assert result.returncode == code, out
    assert "Traceback" not in out
    return result.stdout


def _exported(printed: str) -> dict[str, str]:
    line = next(x for x in printed.splitlines() if x.startswith("export SETTLEQ_CLIENT_KEY_ID="))
    return dict(part.split("=", 1) for part in line.removeprefix("export ").split())


def _until(check: object, within: float = WITHIN_S) -> None:
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - start < within, f"not so within {within} s"
        time.sleep(0.1)


@pytest.mark.regression
def test_a_key_created_with_the_cli_on_a_running_stack_submits_without_a_restart(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 42 #15: a new producer meant editing SETTLEQ_PRODUCER_KEYS and
    restarting the stack."""
    vendor = uid("V-CLI-")
    path = f"/v1/contracts/promo_accrual/{vendor}/1"
    operator = stack.operator()
    request.addfinalizer(operator.close)
    assert operator.bearer("PUT", path, promo_contract()).status_code == 201
    printed = _keys(stack, stack_env, "create", "--partitions", vendor)
    assert "SETTLEQ_PRODUCER_KEYS" not in printed  # stored in the database, not an env entry
    made = _exported(printed)
    key_id, secret = made["SETTLEQ_CLIENT_KEY_ID"], made["SETTLEQ_CLIENT_SECRET"]
    producer = Client(stack.url, key_id=key_id, secret=secret)
    request.addfinalizer(producer.close)
    _until(lambda: producer.signed("GET", "/v1/jobs").status_code == 200)
    batch = tmp_path / "batch.json"
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00")])
    batch.write_text(json.dumps({"kind": "promo_accrual", "documents": [doc]}))
    env = client_environ(stack_env.queue_prefix, key_id=key_id, secret=secret)
    done = run_settleq(["submit", str(batch), "--wait", "--url", stack.url], env)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = _keys(stack, stack_env, "list")
    assert key_id in listed and vendor in listed and secret not in listed
    _keys(stack, stack_env, "scope", key_id, "--partition", "V-OTHER,1")
    _until(lambda: producer.submit(batch.read_bytes()).status_code == 403)
    rotated = _keys(stack, stack_env, "rotate", key_id, "--previous-valid-for", "0")
    new = _exported(rotated)["SETTLEQ_CLIENT_SECRET"]
    assert new != secret
    _until(lambda: producer.signed("GET", "/v1/jobs").status_code == 401)
    _keys(stack, stack_env, "revoke", key_id)
    renewed = Client(stack.url, key_id=key_id, secret=new)
    request.addfinalizer(renewed.close)
    _until(lambda: renewed.signed("GET", "/v1/jobs").status_code == 401)
    assert "revoked" in _keys(stack, stack_env, "list")
    again = run_settleq(
        ["keys", "create", "--partitions", "*", "--key-id", key_id, "--url", stack.url],
        client_environ(stack_env.queue_prefix, token=OPERATOR_TOKEN),
    )
    assert again.returncode == 1 and "producer_key_exists" in again.stderr
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr
    # Shown once, by the command that made it: in no process's log.
    for name in ("api", "fast_path", "compute_heavy"):
        text = stack.log(name, tail=None)
        assert secret not in text and new not in text, name
    # The bootstrap lines, on demand, whatever runs.
    bootstrap = _keys(stack, stack_env, "create", "--partitions", "V-1", "--env")
    assert "export SETTLEQ_PRODUCER_KEYS=" in bootstrap
