"""``settleq remittances`` and ``settleq deductions`` against the API in process
(docs/operations.md#remittances-and-deductions), on each ledger backend: a
JSON remittance and an 820 submitted, listed and shown; deductions listed,
exported (neutralised), shown, aged and decided; what a command refuses."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from rich.console import Console
from sqlalchemy import Engine
from typer.testing import CliRunner, Result

from services.commands import options
from services.commands.client import Client
from services.commands.errors import Refused
from services.commands.finance import remittances as commands
from tests.integration.test_remittances import (
    REALDATA,
    accrual,
    http,  # noqa: F401  (a fixture)
    operator,  # noqa: F401  (a fixture)
    remit,
)
from tests.support.disputes import new_vendor
from tests.support.factories import uid
from tests.support.infra import OPERATOR_TOKEN, PRODUCER_ID, PRODUCER_SECRET, VIEWER_TOKEN

pytestmark = pytest.mark.both_backends
runner = CliRunner()
cli = typer.Typer()
cli.add_typer(commands.app, name="remittances")
cli.add_typer(commands.deductions, name="deductions")


class InProcess(Client):
    def close(self) -> None:
        """The app's client is the module's: a command does not close it."""


@pytest.fixture
def printed(http: TestClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:  # noqa: F811
    """The commands' clients go to the app in process; what they print is kept."""
    console = options.LiteralConsole(width=240, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    monkeypatch.setattr(commands, "console", console)

    def make_client(url: str, key_id: Any, secret: Any, token: Any) -> Client:
        return InProcess("http://testserver", key_id=key_id, secret=secret, token=token, http=http)

    def token_client(url: str, token: Any, role: str) -> Client:
        if not token:
            raise typer.BadParameter(f"{role} token is needed")
        return make_client(url, None, None, token)

    monkeypatch.setattr(commands, "make_client", make_client)
    monkeypatch.setattr(commands, "token_client", token_client)
    yield console


SIGNED = ["--key-id", PRODUCER_ID, "--secret", PRODUCER_SECRET]
VIEWER = ["--token", VIEWER_TOKEN]
OPERATOR = ["--token", OPERATOR_TOKEN]


def run(console: Console, *args: str) -> str:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return console.export_text() + result.stdout


def run_json(*args: str) -> Any:
    result = runner.invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def fails(*args: str) -> Result:
    result = runner.invoke(cli, list(args))
    assert result.exit_code != 0
    return result


def test_a_json_remittance_is_submitted_listed_shown_and_its_deductions_decided(
    engine: Engine, printed: Console, tmp_path: Path
) -> None:
    vendor = new_vendor(engine)
    body = remit(
        vendor,
        {"amount": "-45.00", "reason_code": "06"},
        {"amount": "-2.00", "reason_code": "22", "reference": "=cmd()"},
    )
    del body["partition_key"]  # given on the command line
    file = tmp_path / "remittance.json"
    file.write_text(json.dumps(body))

    said = run(printed, "remittances", "submit", str(file), "--partition", vendor, *SIGNED)
    assert "received remittance rm_" in said and "2 deduction(s)" in said
    assert "disputed 47.00" in said
    rid = said.split("received remittance ")[1].split()[0]
    again = run(printed, "remittances", "submit", str(file), "--partition", vendor, *SIGNED)
    assert f"already received as remittance {rid}" in again

    listed = run(printed, "remittances", "list", "--partition", vendor, *VIEWER)
    assert rid in listed and body["trace"] in listed
    page = run_json("remittances", "list", "--partition", vendor, *VIEWER)
    assert [r["id"] for r in page["remittances"]] == [rid]

    shown = run(printed, "remittances", "show", rid, *VIEWER)
    assert "does not balance" in shown and "shortage (06)" in shown and "freight (22)" in shown
    detail = run_json("remittances", "show", rid, *VIEWER)
    shortage, freight = (d["id"] for d in detail["deductions"])
    assert detail["id"] == rid

    listed = run(printed, "deductions", "list", "--partition", vendor, "--status", "open", *VIEWER)
    assert str(shortage) in listed and "=cmd()" in listed
    export = tmp_path / "deductions.csv"
    wrote = run(printed, "deductions", "list", "--partition", vendor, "--csv", str(export), *VIEWER)
    assert f"wrote {export} (2 deductions)" in wrote
    with export.open(newline="", encoding="utf-8") as written:
        rows = list(csv.DictReader(written))
    assert [r["reference"] for r in rows] == ["", "'=cmd()"]

    shown = run(printed, "deductions", "show", str(freight), *VIEWER)
    assert "=cmd()" in shown and "disputed" in shown and rid in shown


def test_a_json_remittances_deductions_are_decided_and_aged(
    engine: Engine, printed: Console, tmp_path: Path
) -> None:
    vendor = new_vendor(engine)
    first, second = accrual(engine, vendor, "30.00"), accrual(engine, vendor, "30.00")
    body = remit(
        vendor,
        {"amount": "-45.00", "reason_code": "06"},
        {"amount": "-2.00", "reason_code": "22"},
        {"amount": "-3.00", "reason_code": "59"},
    )
    file = tmp_path / "remittance.json"
    file.write_text(json.dumps(body))
    run(printed, "remittances", "submit", str(file), *SIGNED)
    page = run_json("deductions", "list", "--partition", vendor, *VIEWER)
    matched, accepted, denied = (d["id"] for d in page["deductions"])

    decided = run(
        printed,
        "deductions",
        "decide",
        str(matched),
        "--match",
        f"{first}=30.00",
        "--match",
        f"{second}=15.00",
        "--note",
        "split",
        *OPERATOR,
    )
    assert f"deduction {matched}: match; ledger rows" in decided
    run(printed, "deductions", "decide", str(accepted), "--accept", "--note", "ok", *OPERATOR)
    run(printed, "deductions", "decide", str(denied), "--deny", "--note", "recover", *OPERATOR)
    refused = fails("deductions", "decide", str(denied), "--accept", "--note", "x", *OPERATOR)
    assert isinstance(refused.exception, Refused)
    assert refused.exception.code == "deduction_already_decided"

    shown = run(printed, "deductions", "show", str(matched), *VIEWER)
    assert "matched" in shown and first in shown and second in shown and "15.00" in shown
    aged = run(printed, "deductions", "aging", "--partition", vendor, *VIEWER)
    line = next(x for x in aged.splitlines() if vendor in x)
    assert "3.00" in line  # only the denied one is open
    assert "shortage" in aged
    aging = run_json("deductions", "aging", "--partition", vendor, *VIEWER)
    assert aging["totals"]["open_amount"] == "3.00"


def test_an_820_is_submitted_and_shown_with_its_997(
    engine: Engine,
    printed: Console,
    operator: Client,  # noqa: F811
    tmp_path: Path,
) -> None:
    vendor = new_vendor(engine)
    payer = "9" + uid("")[-12:].replace("-", "0")
    trace = uid("T")[-12:]
    data = (REALDATA / "x12.820.issue140.edi").read_bytes()
    data = data.replace(b"*UL*1238742000008", f"*UL*{payer}".encode())
    data = data.replace(b"TRN*3*4529952", f"TRN*3*{trace}".encode())
    body = {"name": "Mart", "contract_version": 1, "payer_partition_key": vendor}
    answer = operator.bearer("PUT", f"/v1/partners/UL/{payer}", body)
    assert answer.status_code in (200, 201), answer.text
    file = tmp_path / "remittance.edi"
    file.write_bytes(data)
    refused = fails("remittances", "submit", str(file), "--partition", vendor, *SIGNED)
    assert refused.exit_code == 2 and "names its partition" in refused.output
    said = run(printed, "remittances", "submit", str(file), *SIGNED)
    assert f"trace {trace}" in said and f"partition {vendor}" in said and "ISA" in said
    rid = said.split("received remittance ")[1].split()[0]
    shown = run(printed, "remittances", "show", rid, *VIEWER)
    assert "26801" in shown and "balances: the stated 21,298.97" in shown and "ISA" in shown


def test_what_a_command_refuses(printed: Console) -> None:
    assert (
        fails("deductions", "decide", "1", "--accept", "--deny", "--note", "x", *OPERATOR).exit_code
        == 2
    )
    assert (
        fails("deductions", "decide", "1", "--match", "nodoc", "--note", "x", *OPERATOR).exit_code
        == 2
    )
    assert fails("deductions", "list").exit_code == 2  # no token
    missing = fails("deductions", "show", "999999999", *VIEWER)
    assert (
        isinstance(missing.exception, Refused) and missing.exception.code == "deduction_not_found"
    )
    bad = fails("deductions", "list", "--status", "pending", *VIEWER)
    assert isinstance(bad.exception, Refused) and bad.exception.code == "invalid_status"
