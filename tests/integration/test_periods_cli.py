"""``settleq periods list|close|journal|lines``, ``settleq balances`` and
``settleq statement`` against a real API over a real ledger
(docs/operations.md#the-month-end-close): the close asks first and prints its
journal's SHA-256, which the journal file's bytes hash to; the lines add up to
the entries; a producer key reads its own partitions only; every refusal is
one line with its exit code. Each test has a ledger of its own (a close is the
whole ledger's) and an API serving it on a port, which the commands reach as
a user's would."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import typer.main
from click.testing import CliRunner, Result
from sqlalchemy import Engine

from services.commands import errors
from services.commands.cli import app
from services.commands.options import console
from shared.adapters.db.engine import make_engine
from shared.domain.periods import JOURNAL_COLUMNS
from tests.support.factories import promo_doc, promo_line
from tests.support.infra import (
    OPERATOR_TOKEN,
    SCOPED_ID,
    SCOPED_PARTITIONS,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
    migrate,
)
from tests.support.periods import settle_promo
from tests.support.served import api_in_thread
from tests.support.stack import ROOT, free_port
from tests.unit.conftest import restore_logging  # noqa: F401 - the CLI configures logging

pytestmark = pytest.mark.usefixtures("restore_logging")

OWN, OTHER = SCOPED_PARTITIONS[0], "V-OTHER"


class _Settleq:
    """``settleq`` as its entry point runs it (``services.commands.cli.main``): a
    failure a user can fix is said on stderr, one line a problem, with its exit code."""

    name = "settleq"
    command = typer.main.get_command(app)  # once: typer builds it in half a second

    def main(self, args: list[str], prog_name: str, **extra: Any) -> None:
        errors.run(lambda: self.command.main(args=args, prog_name=prog_name, **extra))


@pytest.fixture
def served(tmp_path: Path, test_env: ServiceEnv) -> Iterator[tuple[str, Engine]]:
    """An API on a port of its own over a fresh SQLite ledger; its URL and the ledger."""
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrate(database)
    engine = make_engine(database)
    settings = test_env.settings(database_url=database)
    try:
        with api_in_thread(settings) as url:
            yield url, engine
    finally:
        engine.dispose()


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console, "width", 250)  # whole table rows to assert on


def settleq(
    url: str, *args: str, token: str | None = VIEWER_TOKEN, stdin: str = "", code: int = 0
) -> Result:
    env = {"SETTLEQ_URL": url, "SETTLEQ_CLIENT_TOKEN": token, "SETTLEQ_CLIENT_KEY_ID": None}
    result = CliRunner().invoke(_Settleq(), list(args), input=stdin, env=env)  # type: ignore[arg-type]
    assert result.exit_code == code, result.output + result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def producer(url: str, *args: str, code: int = 0) -> Result:
    """A command signed with the scoped producer key (no bearer token)."""
    return settleq(
        url, *args, "--key-id", SCOPED_ID, "--secret", SCOPED_SECRET, token=None, code=code
    )


def _month(engine: Engine) -> None:
    settle_promo(
        engine, [promo_doc(OWN, [promo_line(1, "10", "1.25"), promo_line(2, "10", "9.99")])]
    )
    settle_promo(engine, [promo_doc(OTHER, [promo_line(1, "8", "1.00")])])


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(), newline="")))


def _open_name(url: str) -> str:
    page = json.loads(settleq(url, "periods", "list", "--json").stdout)
    [period] = [p for p in page["items"] if p["status"] == "open"]
    return str(period["name"])


def test_a_month_end_from_the_command_line(served: tuple[str, Engine], tmp_path: Path) -> None:
    url, engine = served
    _month(engine)
    name = _open_name(url)
    listed = settleq(url, "periods", "list").stdout
    assert name in listed and "open" in listed
    assert "promo_accrual posted USD 2.25 (2 rows)" in listed

    # The confirmation states the totals and the dispute carried over; "no" closes nothing.
    asked = settleq(
        url, "periods", "close", name, "--next", "P2", token=OPERATOR_TOKEN, stdin="n\n", code=1
    ).stdout
    assert "3 ledger rows; the close opens P2" in asked
    assert "open promo_accrual disputes it carries over: 1, variance USD 8.74" in asked
    assert "dead letters waiting: 0" in asked and f"Close {name} and open P2?" in asked
    assert _open_name(url) == name

    # The wrong period and a used name: one line each, exit 1.
    wrong = settleq(
        url, "periods", "close", "nope", "--next", "P2", "--yes", token=OPERATOR_TOKEN, code=1
    )
    assert wrong.stderr.splitlines() == [
        f"settleq: 409 period_not_open: {json.loads(_close_body(url, 'nope'))['error']['message']}"
    ]
    used = settleq(
        url, "periods", "close", name, "--next", name, "--yes", token=OPERATOR_TOKEN, code=1
    )
    [line] = used.stderr.splitlines()
    assert line.startswith("settleq: 422 period_name_used: next: ")

    closed = settleq(
        url,
        "periods",
        "close",
        name,
        "--next",
        "P2",
        "--note",
        "[December]",
        "--yes",
        token=OPERATOR_TOKEN,
    ).stdout
    assert f"closed {name}: 3 ledger rows; P2 is open" in closed
    assert "open promo_accrual disputes carried over: 1, variance USD 8.74" in closed
    digest = closed.split("journal sha256 ")[1].split()[0]
    assert len(digest) == 64
    assert digest in settleq(url, "periods", "list").stdout

    # The journal: the API's bytes, whose SHA-256 is the close's.
    journal = tmp_path / "journal.csv"
    said = settleq(url, "periods", "journal", name, "--csv", str(journal)).stdout
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == digest
    assert f"sha256 {digest}" in said and "final" in said and "(3 entries)" in said
    rows = _csv(journal)
    assert tuple(rows[0]) == JOURNAL_COLUMNS and len(rows) == 6
    entries = {r["external_id"]: Decimal(r["debit"]) for r in rows if r["debit"]}
    as_json = tmp_path / "journal.json"
    said = settleq(url, "periods", "journal", name, "--json", str(as_json)).stdout
    assert json.loads(as_json.read_text())["sha256"] == digest and "final" in said

    # Its lines, streamed: one per ledger row, adding up to each entry.
    lines = tmp_path / "lines.csv"
    assert "(3 rows)" in settleq(url, "periods", "lines", name, "--csv", str(lines)).stdout
    sums: dict[str, Decimal] = {}
    for r in _csv(lines):
        sums[r["external_id"]] = sums.get(r["external_id"], Decimal(0)) + Decimal(r["delta"])
    assert sums == entries
    own = tmp_path / "own.json"
    said = settleq(url, "periods", "lines", name, "--partition-key", OWN, "--json", str(own)).stdout
    assert "(2 rows)" in said and len(json.loads(own.read_text())["items"]) == 2

    # Balances of the closed period: a table with a total, and a CSV.
    table = settleq(url, "balances", "--period", name).stdout
    assert f"period {name} (closed: final)" in table
    rows_of = {r.split("│")[2].strip(): r.split("│")[3:] for r in table.splitlines() if "│" in r}
    # currency, then opening, posted, disputed, repriced, resolved, deducted, written_off, closing
    assert rows_of["total"][0].strip() == "USD"
    assert [c.strip() for c in rows_of["total"][1:9]] == [
        "0.00",
        "2.25",
        "1.25",
        "0.00",
        "0.00",
        "0.00",
        "0.00",
        "3.50",
    ]
    as_csv = tmp_path / "balances.csv"
    settleq(url, "balances", "--period", name, "--csv", str(as_csv))
    closing = {r["partition_key"]: r["closing"] for r in _csv(as_csv)}
    assert closing == {OWN: "2.50", OTHER: "1.00"}
    # A remittance's sums come last, so a reader by position reads the rest still.
    header = as_csv.read_text().splitlines()[0].split(",")
    assert header[8] == "closing" and header[-3:] == ["deducted", "written_off", "currency"]
    assert {r["deducted"] for r in _csv(as_csv)} == {"0.00"}
    now = settleq(url, "balances").stdout
    assert "period P2 (open" in now

    # A statement: its lines, its closing and who owes it; a file is the API's bytes.
    said = settleq(url, "statement", OWN, "--period", name).stdout
    assert f"{OWN} owes us 2.50" in said and "opening" in said and "closing" in said
    statement = tmp_path / "statement.csv"
    settleq(url, "statement", OWN, "--period", name, "--csv", str(statement))
    kinds = [r["row"] for r in _csv(statement)]
    assert kinds == ["opening", "line", "line", "closing"]


def _close_body(url: str, period: str) -> str:
    """The API's own answer to closing ``period`` (it is not the open one)."""
    import httpx

    body = {"period": period, "next": "P9"}
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    return httpx.post(f"{url}/admin/periods/close", json=body, headers=headers).text


def test_a_producer_key_reads_its_own_partitions_only(served: tuple[str, Engine]) -> None:
    url, engine = served
    _month(engine)
    mine = producer(url, "balances").stdout
    assert OWN in mine and OTHER not in mine
    refused = producer(url, "balances", "--partition-key", OTHER, code=1).stderr
    assert refused.splitlines() == [
        "settleq: 403 partition_not_allowed: this key may not read that partition"
    ]
    assert f"{OWN} owes us 2.50" in producer(url, "statement", OWN).stdout
    assert "403 partition_not_allowed" in producer(url, "statement", OTHER, code=1).stderr


def test_what_a_command_cannot_do_is_one_line(served: tuple[str, Engine], tmp_path: Path) -> None:
    url, _ = served
    name = _open_name(url)
    nowhere = str(tmp_path / "missing" / "journal.csv")
    said = settleq(url, "periods", "journal", name, "--csv", nowhere, code=1).stderr
    assert said.splitlines() == [f"settleq: cannot write {nowhere}: No such file or directory"]
    assert not list(tmp_path.glob("**/*.part"))
    usage = settleq(url, "periods", "journal", name, code=2).stderr
    assert "give --csv FILE or --json FILE" in usage
    both = settleq(url, "balances", "--period", name, "--as-of", "2026-12-31T00:00:00Z", code=2)
    assert "give --period or --as-of, not both" in both.stderr
    down = f"http://127.0.0.1:{free_port()}"
    [line] = settleq(down, "periods", "list", code=1).stderr.splitlines()
    assert line.startswith("settleq: cannot reach the API at")
    missing = settleq(url, "statement", OWN, "--period", "nope", code=1).stderr
    assert missing.splitlines() == ["settleq: 404 period_not_found: no period is named nope"]


def test_a_refused_close_as_a_user_runs_it(served: tuple[str, Engine]) -> None:
    url, _ = served
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.commands.cli",
            "periods",
            "close",
            "nope",
            "--next",
            "P2",
            "--yes",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "SETTLEQ_URL": url, "SETTLEQ_CLIENT_TOKEN": OPERATOR_TOKEN},
    )
    assert result.returncode == 1 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("settleq: 409 period_not_open: ")


@pytest.mark.regression
def test_a_statement_shows_a_repriced_line_as_repriced_with_its_version(
    served: tuple[str, Engine], tmp_path: Path
) -> None:
    """Issue 52 item 11: a line re-priced under version 2 read as a second
    ``posted`` row with no version, where balances count it as ``repriced``."""
    url, engine = served
    line = promo_line(1, "10", "1.25")
    settle_promo(engine, [promo_doc(OWN, [line], document_id="INV-RP")])
    settle_promo(engine, [promo_doc(OWN, [line], version=2, document_id="INV-RP")])
    name = _open_name(url)
    said = settleq(url, "statement", OWN, "--period", name).stdout
    rows = [[c.strip() for c in r.split("│")[1:-1]] for r in said.splitlines() if "INV-RP" in r]
    assert [r[1:4] for r in rows if r[1]] == [["1", "v1", "posted"], ["1", "v2", "repriced"]]
    statement = tmp_path / "statement.csv"
    settleq(url, "statement", OWN, "--period", name, "--csv", str(statement))
    lines = [(r["contract_version"], r["activity"]) for r in _csv(statement) if r["row"] == "line"]
    assert lines == [("1", "posted"), ("2", "repriced")]
    balances = settleq(url, "balances", "--period", name, "--json", str(tmp_path / "b.json"))
    assert balances.exit_code == 0
    [balance] = json.loads((tmp_path / "b.json").read_text())["items"]
    assert Decimal(balance["repriced"]) == Decimal("0.25")  # 10 x (0.150 - 0.125)
