"""The one CSV writer (services/api/csv_export.py): text a spreadsheet would
run as a formula is neutralised, numbers stay numbers."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.api.csv_export import chunks
from shared.wire.cells import FORMULA_START, Cell, cell

HOSTILE = ['=HYPERLINK("http://evil.example/x","y")', "+1+2", "-1+2", "@SUM(1)", "\t=1", "\r=1"]


def read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


@pytest.mark.regression
@pytest.mark.parametrize("text", HOSTILE)
def test_a_text_cell_a_spreadsheet_would_run_is_prefixed_with_a_quote(text: str) -> None:
    # Before (issue 29, G2): written verbatim, so a vendor's document id ran as
    # a formula in finance's spreadsheet.
    [_, row] = read("".join(chunks(["document_id"], [[text]])))
    assert row == ["'" + text]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("-2.50"), "-2.50"),
        (Decimal("1E+3"), "1000"),
        (Decimal("-0.00"), "0.00"),
        (Decimal("0.0001"), "0.0001"),
        (-7, "-7"),
        (None, ""),
        ("INV-1", "INV-1"),
        ("", ""),
        ("a=b", "a=b"),
    ],
)
def test_numbers_stay_numbers_and_plain_text_is_unchanged(value: Cell, text: str) -> None:
    assert cell(value) == text


@given(st.text())
def test_no_text_cell_starts_a_formula_and_none_loses_a_character(text: str) -> None:
    written = cell(text)
    assert not written.startswith(FORMULA_START)
    assert written in (text, "'" + text)
    [_, [back]] = read("".join(chunks(["c"], [[text]])))
    assert back == written


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_every_decimal_is_a_plain_number(value: Decimal) -> None:
    written = cell(value)
    assert "E" not in written.upper() and not written.startswith("'")
    assert Decimal(written) == value
