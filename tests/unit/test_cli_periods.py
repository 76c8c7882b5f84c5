"""``settleq balances`` and ``settleq statement`` as a person reads them
(docs/operations.md#the-month-end-close): amounts at their kind's quantum with
thousands grouped, a money kind's total, a recipe's unit costs shown but never
added into one, names printed as sent; and the row count of a streamed export,
whichever chunk a row's end arrives in."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from services.commands import options
from services.commands.cli import app
from services.commands.finance import periods as commands

pytestmark = pytest.mark.usefixtures("restore_logging")
runner = CliRunner()
ODD = "V-[bold]x[/bold]\x1b[31m"


def _balance(kind: str, partition: str, closing: str, direction: str | None) -> dict[str, Any]:
    return {
        "kind": kind,
        "partition_key": partition,
        "currency": "USD",
        "direction": direction,
        "opening": "0",
        "posted": closing,
        "disputed": "0",
        "repriced": "0",
        "resolved": "0",
        "deducted": "0",
        "written_off": "0",
        "closing": closing,
        "rows": 2,
        "in_dispute": {"count": 0, "variance": "0"},
    }


BALANCES = {
    "period": "2026-12",
    "final": False,
    "as_of": None,
    "items": [
        _balance("promo_accrual", "V-1", "1234567.5", "owed_to_us"),
        _balance("promo_accrual", ODD, "0.25", "owed_to_us"),
        _balance("recipe_cost", "R-1", "3.14", None),
    ],
    "next_cursor": None,
}
STATEMENT = {
    "partition_key": "R-1",
    "period": "2026-12",
    "final": True,
    "sections": [
        {
            "kind": "recipe_cost",
            "direction": None,
            "opening": "0.0000",
            "documents": [],
            "closing": "3.1416",
            "in_dispute": {"count": 0, "variance": "0.0000"},
            "owed": None,
        }
    ],
}


class FakeClient:
    def get(self, path: str) -> httpx.Response:
        return httpx.Response(200, json=STATEMENT if "/statement" in path else BALANCES)

    def close(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Console:
    console = options.LiteralConsole(width=200, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    monkeypatch.setattr(commands, "console", console)
    monkeypatch.setattr(commands, "make_client", lambda *a: FakeClient())
    return console


def test_balances_group_thousands_and_never_add_unit_costs_to_money(fake: Console) -> None:
    result = runner.invoke(app, ["balances", "--token", "t"])
    assert result.exit_code == 0, result.output
    text = fake.export_text()
    table = [
        [c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines() if "│" in line
    ]
    header = next(line for line in text.splitlines() if "┃" in line)
    closing = [c.strip() for c in header.split("┃")[1:-1]].index("closing")
    rows = {cells[1]: cells for cells in table}
    assert rows["V-1"][closing] == "1,234,567.50"
    assert rows["total"][closing] == "1,234,567.75"  # promo_accrual's: the recipe is not in it
    assert rows["R-1"][closing] == "3.1400"  # at recipe_cost's quantum, 0.0001
    assert [cells[:2] for cells in table if cells[1] == "total"] == [["promo_accrual", "total"]]
    assert "recipe_cost amounts are unit costs" in text
    assert "V-[bold]x[/bold]\\x1b[31m" in text  # as sent, never markup or a colour


def test_a_recipes_statement_says_nothing_is_owed_on_unit_costs(fake: Console) -> None:
    result = runner.invoke(app, ["statement", "R-1", "--token", "t"])
    assert result.exit_code == 0, result.output
    text = fake.export_text()
    assert "statement of R-1, period 2026-12 (final)" in text
    assert "3.1416" in text and "nothing is owed on them" in text


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_a_streamed_exports_rows_are_counted_whatever_its_chunks(size: int) -> None:
    body = b'{"period":"P","items":[' + b",".join(b'{"period":"P","id":%d}' % i for i in range(5))
    body += b"]}"
    count = commands._RowCounter(b'{"period":')
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    assert sum(count(c) for c in chunks) - 1 == 5
    csv_count = commands._RowCounter(b"\n")
    text = b"a,b\r\n1,2\r\n3,4\r\n"
    assert sum(csv_count(text[i : i + size]) for i in range(0, len(text), size)) - 1 == 2
