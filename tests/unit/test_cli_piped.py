"""What a client command writes to a pipe or a file is its data whole (issue 52,
items 10 and 11): no row of ``ledger feed`` or of a table wrapped at 80
columns, and a read without credentials says how to give a viewer token."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shared.domain.feed import COLUMNS
from tests.support.canned_api import CannedApi
from tests.support.stack import ROOT

DOCUMENT = "INV-2026-12-ACME-WHOLESALE-NORTHEAST-REGION-000000000042"


def feed_row(n: int) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(COLUMNS)
    row.update(
        id=n,
        reconciliation_key="a" * 64,
        contract_version=2,
        kind="promo_accrual",
        partition_key="VENDOR-ACME-WHOLESALE",
        document_id=DOCUMENT,
        line_ref=str(n),
        job_id="j" * 32,
        outcome="posted",
        amount="12.50",
        claimed_amount="12.50",
        delta="12.50",
        created_at="2026-12-01T12:00:00.123456Z",
        period="2026-12",
    )
    return row


def piped(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A command whose stdout is a pipe, as ``settleq ... | grep`` runs it: no
    COLUMNS, so nothing tells it a width."""
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return subprocess.run(
        [sys.executable, "-m", "services.commands.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )


def feed_answer(method: str, path: str) -> tuple[int, object]:
    if "after=" in path:
        return 200, {"items": [], "next_cursor": "c1"}
    return 200, {"items": [feed_row(1), feed_row(2)], "next_cursor": "c1"}


@pytest.mark.regression
def test_a_piped_feed_prints_each_row_on_one_line() -> None:
    """Item 10: a row was wrapped at 80 columns, its document id split across lines."""
    with CannedApi(feed_answer) as api:
        result = piped("ledger", "feed", "--url", api.url, SETTLEQ_CLIENT_TOKEN="t")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2, result.stdout
    assert all(DOCUMENT in line and line.endswith(f"job {'j' * 32}") for line in lines), lines


@pytest.mark.regression
def test_a_piped_table_keeps_every_cell_whole() -> None:
    """Item 10's other tables: a cell longer than the widest a terminal gets
    (a reason of 60 words) is still written whole to a pipe."""
    reason = " ".join(f"word{n}" for n in range(60))
    line = {
        "job_id": "j" * 32,
        "kind": "promo_accrual",
        "partition_key": "VENDOR-1",
        "line_ref": "1",
        "contract_version": 1,
        "outcome": "dead_lettered",
        "reason": reason,
        "amount": None,
        "claimed_amount": "1.00",
        "delta": None,
        "dispute_status": None,
    }
    page = {"items": [line], "next_cursor": None}
    with CannedApi(lambda method, path: (200, page)) as api:
        result = piped(
            "lines", "find", "--document", "D1", "--url", api.url, SETTLEQ_CLIENT_TOKEN="t"
        )
    assert result.returncode == 0, result.stderr
    assert reason in result.stdout, result.stdout


@pytest.mark.regression
def test_a_feed_without_credentials_says_how_to_give_a_viewer_token() -> None:
    """Item 11: the refusal named only a producer key's --key-id and --secret."""
    result = piped("ledger", "feed", "--url", "http://127.0.0.1:9")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "--token" in result.stderr and "SETTLEQ_CLIENT_TOKEN" in result.stderr
