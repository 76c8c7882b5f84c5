"""What client commands print (issue 15, items 2 to 4): money at the kind's
quantum with separators and never cut off at 80 columns; one line and exit 1
for every failure a user can fix; stdin NDJSON recognised; a requeue of
everything asks first."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from decimal import Decimal

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from services.commands import options
from services.commands.cli import app
from services.commands.errors import Refused, answer, explain
from services.commands.intake.batches import is_ndjson
from services.commands.money import money
from tests.support.canned_api import CannedApi
from tests.support.stack import ROOT

pytestmark = pytest.mark.usefixtures("restore_logging")


@pytest.mark.parametrize(
    ("amount", "kind", "shown"),
    [
        ("1234567890.1200", "promo_accrual", "1,234,567,890.12"),
        ("1234567890.1200", "recipe_cost", "1,234,567,890.1200"),
        ("-0.5", "freight_audit", "-0.50"),
        ("0", "promo_accrual", "0.00"),
        ("12.3456", "promo_accrual", "12.3456"),  # more places than the quantum: all kept
        (Decimal("1E+3"), "recipe_cost", "1,000.0000"),
        (None, "promo_accrual", ""),
        ("n/a", "promo_accrual", "n/a"),
    ],
)
def test_money_is_at_the_kinds_quantum_with_separators(
    amount: str | Decimal | None, kind: str, shown: str
) -> None:
    assert money(amount, kind) == shown


def test_a_job_table_at_80_columns_shows_whole_amounts(monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(width=80, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    job = {
        "job_id": "j" * 32,
        "kind": "promo_accrual",
        "state": "completed",
        "lines": 123456,
        "outcomes": {"posted": 123000, "disputed": 456, "duplicate": 0, "dead_lettered": 0},
        "amounts": {"posted": "1234567890.1200", "disputed": "9876543210.9900"},
    }
    options.print_job(job)
    text = console.export_text()
    assert "1,234,567,890.12" in text and "9,876,543,210.99" in text, text
    assert "…" not in text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settleq(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.commands.cli", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["status", "j1", "--token", "t"], "cannot reach the API at http://127.0.0.1:"),
        (
            ["submit", "/nonexistent/batch.json", "--key-id", "k", "--secret", "s"],
            "cannot read /nonexistent/batch.json",
        ),
        (["jobs", "list", "--token", "t"], "is `settleq up` running?"),
        (["dlq", "list", "--token", "t"], "is `settleq up` running?"),
    ],
)
def test_a_client_failure_is_one_line_and_exit_1(args: list[str], says: str) -> None:
    result = settleq(*args, "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_missing_credentials_are_one_line_and_exit_2() -> None:
    """A usage or configuration error (docs/operations.md#commands), as a missing token is."""
    result = settleq("status", "j1", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "a viewer token or a producer key is needed" in (
        result.stderr
    )


def test_an_api_refusal_names_its_status_code_and_message() -> None:
    body = {"error": {"code": "job_not_found", "message": "no such job", "details": None}}
    response = httpx.Response(404, json=body, request=httpx.Request("GET", "http://x/v1/jobs/j"))
    with pytest.raises(Refused) as refused:
        answer(response)
    assert str(refused.value) == "404 job_not_found: no such job"
    error = httpx.HTTPStatusError("404", request=response.request, response=response)
    assert explain(error) == "404 job_not_found: no such job"
    plain = httpx.Response(502, text="<html>bad\ngateway</html>", request=response.request)
    assert explain(httpx.HTTPStatusError("502", request=response.request, response=plain)) == (
        "502 Bad Gateway: <html>bad gateway</html>"
    )
    assert explain(ValueError("a bug")) is None  # a bug keeps its traceback


def test_stdin_ndjson_is_told_from_a_json_batch() -> None:
    ndjson = b'{"kind": "promo_accrual"}\n{"document_id": "D1"}\n'
    assert is_ndjson(ndjson)
    assert not is_ndjson(json.dumps({"kind": "k", "documents": []}).encode() + b"\n")
    assert not is_ndjson(json.dumps({"kind": "k", "documents": [1]}, indent=2).encode())
    assert not is_ndjson(b"")


def test_requeue_of_everything_asks_first_and_sends_nothing_on_no() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: a request would fail otherwise
    result = CliRunner().invoke(app, ["dlq", "requeue", "--token", "t", "--url", url], input="n\n")
    assert result.exit_code == 1
    assert "Requeue every dead letter (up to 1000)?" in result.output
    assert "cannot reach" not in result.output


def test_a_list_wider_than_80_columns_keeps_every_id_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Narrowed to 80 columns, a jobs or disputes list cut ids to ``INV…`` and
    squeezed the kind and state columns to nothing: it is printed as wide as it needs."""
    console = Console(width=80, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    from rich.table import Table

    table = Table(title="jobs")
    for column in ("job", "kind", "state", "created", "document"):
        table.add_column(column, no_wrap=column in ("job", "created"))
    options.amount_column(table, "amount posted")
    row = ("j" * 32, "promo_accrual", "completed", "2026-12-01T14:21:27Z", "INV-1796134873-0000020")
    table.add_row(*row, "66,895.33")
    options.show(table)
    text = console.export_text()
    assert all(cell in text for cell in row), text
    assert "…" not in text
    assert console.width == 80  # the console is as it was for what follows


@pytest.mark.regression
def test_status_says_how_many_duplicates_came_with_a_different_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 42 item 14: a corrected claim resent was a silent duplicate."""
    console = Console(width=80, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    job = {
        "job_id": "j" * 32,
        "kind": "promo_accrual",
        "state": "completed",
        "lines": 3,
        "outcomes": {"posted": 1, "disputed": 0, "duplicate": 2, "dead_lettered": 0},
        "duplicates_claim_differs": 1,
        "amounts": {"posted": "1.00", "disputed": "0"},
    }
    options.print_job(job)
    text = console.export_text()
    assert "1 duplicates were sent again with a different claim" in text
    assert f"settleq jobs lines {'j' * 32} --outcome duplicate" in text


@pytest.mark.regression
def test_a_bulk_requeue_prints_what_it_skipped_and_why() -> None:
    """Issue 42 item 13: the CLI printed ``requeued n`` for letters that could only
    fail again."""
    answered = {"requeued": 2, "skipped": 3, "would_fail_again": {"unknown_promo_tier": 3}}
    with CannedApi(lambda method, path: (200, answered)) as api:
        result = CliRunner().invoke(
            app,
            ["dlq", "requeue", "--reason", "unknown_promo_tier", "--url", api.url],
            env={"SETTLEQ_CLIENT_TOKEN": "operator-token"},
        )
    assert result.exit_code == 0, result.output
    [sent] = api.requests
    assert (sent.method, sent.path) == ("POST", "/admin/dead-letters/requeue")
    assert sent.headers["authorization"] == "Bearer operator-token"
    assert json.loads(sent.body)["reason"] == "unknown_promo_tier"
    assert "requeued 2" in result.output
    assert "skipped 3 that would be dead-lettered again: unknown_promo_tier 3" in result.output


@pytest.mark.regression
def test_gen_says_which_partitions_the_demo_has_no_contract_for() -> None:
    """Issue 52 item 11: ``gen --partitions 20`` made a batch whose lines of 15
    partitions were dead-lettered, unsaid: ``settleq demo`` publishes 5."""
    spread = settleq("gen", "--partitions", "20", "--lines", "40")
    assert spread.returncode == 0, spread.stderr
    assert len(json.loads(spread.stdout)["documents"]) == 4  # stdout is the batch alone
    [note] = spread.stderr.splitlines()
    assert "publishes promo_accrual contracts (version 1) for 5 vendors" in note
    assert "the other 15 are dead-lettered (unknown_contract_version)" in note
    assert "--partitions 5" in note
    covered = settleq("gen", "--kind", "recipe_cost", "--partitions", "5", "--lines", "40")
    assert covered.returncode == 0 and covered.stderr == "", covered.stderr
