"""What a newcomer's first commands print against a running stack (issue 52,
item 11): ``submit --wait`` shows a disputed line at the model's amount, as
balances book it, with the claim apart; and ``settleq demo`` totals no
recipe's unit costs."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.cli import client_environ
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN, PRODUCER_ID, PRODUCER_SECRET, ServiceEnv
from tests.support.stack import ROOT, Stack

CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}


def settleq(
    stack: Stack, stack_env: ServiceEnv, *args: str, stdin: str = "", token: str = OPERATOR_TOKEN
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "services.commands.cli", *args, "--url", stack.url],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=client_environ(stack_env.queue_prefix, token),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def row(table: str, first: str) -> list[str]:
    """The cells of the table row that starts with ``first``."""
    for line in table.replace("┃", "│").splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{table}")


@pytest.mark.regression
def test_submit_wait_shows_a_disputed_line_at_the_model_as_balances_do(
    stack: Stack, stack_env: ServiceEnv, tmp_path: Path
) -> None:
    """The README's two lines: 100 x 0.125 claimed 12.50 (posted) and 40 x 0.125
    claimed 6.00 where the model says 5.00 (disputed). The outcome table said
    6.00 under "amount"; balances book 5.00."""
    vendor = uid("OUT-")
    body = tmp_path / "contract.json"
    body.write_text(json.dumps(CONTRACT))
    settleq(stack, stack_env, "contracts", "put", "promo_accrual", vendor, "1", str(body))
    lines = [promo_line(1, "100", "12.50"), promo_line(2, "40", "6.00")]
    ndjson = json.dumps({"kind": "promo_accrual"}) + "\n" + json.dumps(promo_doc(vendor, lines))
    waited = settleq(stack, stack_env, "submit", "-", "--wait", stdin=ndjson + "\n").stdout
    header = row(waited, "outcome")
    disputed = dict(zip(header, row(waited, "disputed"), strict=True))
    posted = dict(zip(header, row(waited, "posted"), strict=True))
    assert (disputed["amount"], disputed["claimed"]) == ("5.00", "6.00"), waited
    assert (posted["amount"], posted["claimed"]) == ("12.50", ""), waited

    answer = tmp_path / "balances.json"
    settleq(stack, stack_env, "balances", "--partition-key", vendor, "--json", str(answer))
    [balance] = json.loads(answer.read_text())["items"]
    assert Decimal(balance["disputed"]) == Decimal(disputed["amount"])
    assert Decimal(balance["posted"]) == Decimal(posted["amount"])


@pytest.mark.regression
def test_the_demo_totals_no_recipe_unit_costs(stack: Stack, stack_env: ServiceEnv) -> None:
    """A recipe's amounts are unit costs: the demo printed their sum as the job's
    "amount", as if money."""
    demo = settleq(
        stack,
        stack_env,
        "demo",
        "--lines",
        "8",
        "--key-id",
        PRODUCER_ID,
        "--secret",
        PRODUCER_SECRET,
        "--token",
        OPERATOR_TOKEN,
    ).stdout
    tables = demo.split("submitted ")[1:]
    [recipe] = [t for t in tables if t.startswith("recipe_cost")]
    assert "amount" not in row(recipe, "outcome"), recipe
    assert "recipe_cost amounts are unit costs, not totalled" in recipe
    [promo] = [t for t in tables if t.startswith("promo_accrual")]
    assert row(promo, "outcome") == ["outcome", "lines", "amount", "claimed"], promo
