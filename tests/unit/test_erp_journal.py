"""The journal as each ERP's import file (shared/domain/erp_journal.py): each
file read back column by column the way its ERP reads it."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections import defaultdict
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from shared.domain import erp_journal
from shared.domain.erp_journal import COLUMNS, FORMATS
from shared.domain.kinds import DEDUCTION_KIND, KINDS, shown
from shared.domain.periods import MATCHES, Entry, external_id
from shared.wire.cells import cell

D = Decimal
PERIOD = "2026-11"
CLOSE = dt.date(2026, 11, 30)
# A kind shown at another quantum than the deduction kind's, so that each
# amount is seen to keep its own kind's places.
OTHER_KIND = next(n for n, k in sorted(KINDS.items()) if k.quantum != KINDS[DEDUCTION_KIND].quantum)
LONG_KEY = "recipe-" + "x" * 110
WRITERS = {
    "netsuite": erp_journal.netsuite_csv,
    "oracle_gl": erp_journal.oracle_gl_csv,
    "sap": erp_journal.sap_csv,
}


def entry(
    kind: str,
    key: str,
    debit: str,
    credit: str,
    amount: str,
    *,
    outcome: str | None = None,
    currency: str = "USD",
    entity: str = "US01",
    counterparty: str = "",
) -> Entry:
    return Entry(
        external_id(PERIOD, kind, key, outcome),
        PERIOD,
        kind,
        key,
        debit,
        credit,
        D(amount),
        3,
        outcome,
        accounting_date=CLOSE,
        currency=currency,
        entity=entity,
        counterparty=counterparty,
    )


RECEIVABLE = "1310 Vendor promotional receivable"
EARNED = "4560 Promotional allowances earned"
COST = "5100 Recipe cost"
PAYABLE = "2100 Recipe payable"

ENTRIES = [
    entry(DEDUCTION_KIND, "V-100", RECEIVABLE, EARNED, "125.5", counterparty="Acme, Inc."),
    # A negative sum: the same accounts, sides swapped.
    entry(DEDUCTION_KIND, "V-200", EARNED, RECEIVABLE, "40", counterparty='=HYPERLINK("x")'),
    entry(
        DEDUCTION_KIND,
        "V-200",
        "1250 Deductions clearing",
        RECEIVABLE,
        "7.25",
        outcome=MATCHES[0],
        entity="",
    ),
    entry(OTHER_KIND, LONG_KEY + "a", COST, PAYABLE, "3.1416", currency="EUR", entity="DE01"),
    entry(OTHER_KIND, LONG_KEY + "b", COST, PAYABLE, "2", currency="EUR", entity="DE01"),
]


def read(data: bytes) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(data.decode(), newline=""))
    rows = list(reader)
    assert reader.fieldnames is not None
    return list(reader.fieldnames), rows


def amount(text: str) -> D:
    return D(text) if text else D(0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_file_is_a_header_and_two_lines_per_entry_with_crlf_ends(fmt: str) -> None:
    data = WRITERS[fmt](ENTRIES)
    header, rows = read(data)
    assert header == [c.name for c in COLUMNS[fmt]]
    assert len(rows) == 2 * len(ENTRIES)
    assert data.endswith(b"\r\n") and data.count(b"\r\n") == len(rows) + 1
    assert b"\n" not in data.replace(b"\r\n", b"")


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_same_entries_are_the_same_bytes(fmt: str) -> None:
    first = WRITERS[fmt](ENTRIES)
    assert WRITERS[fmt](iter(list(ENTRIES))) == first
    assert WRITERS[fmt](ENTRIES) == first


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_entry_without_an_accounting_date_is_refused(fmt: str) -> None:
    undated = replace(ENTRIES[0], accounting_date=None)
    with pytest.raises(ValueError, match="accounting_date"):
        WRITERS[fmt]([ENTRIES[1], undated])


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_cell_is_longer_than_its_documented_length(fmt: str) -> None:
    _, rows = read(WRITERS[fmt](ENTRIES))
    for column in COLUMNS[fmt]:
        if column.max_length is not None:
            assert all(len(r[column.name]) <= column.max_length for r in rows), column.name


def test_netsuite_reads_one_balanced_entry_per_external_id() -> None:
    _, rows = read(erp_journal.netsuite_csv(ENTRIES))
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        groups[row["External ID"]].append(row)
    assert list(groups) == [e.external_id for e in ENTRIES]
    for e in ENTRIES:
        debit, credit = groups[e.external_id]
        assert sum(amount(r["Debit"]) for r in (debit, credit)) == e.amount
        assert sum(amount(r["Credit"]) for r in (debit, credit)) == e.amount
        assert (debit["Account"], debit["Credit"]) == (e.debit, "")
        assert (credit["Account"], credit["Debit"]) == (e.credit, "")
        assert debit["Debit"] == credit["Credit"] == shown(e.kind, e.amount)
        for row in (debit, credit):
            assert dt.datetime.strptime(row["Date"], "%m/%d/%Y").date() == e.accounting_date
            assert row["Subsidiary"] == e.entity
            assert row["Currency"] == e.currency
            assert row["Memo"] == e.memo
    assert groups[ENTRIES[0].external_id][0]["Name"] == "Acme, Inc."
    # A formula is shown as text, never run by the spreadsheet it is checked in.
    assert groups[ENTRIES[1].external_id][1]["Name"] == '\'=HYPERLINK("x")'
    assert groups[ENTRIES[3].external_id][0]["Debit"] == "3.1416"  # the kind's own places
    assert groups[ENTRIES[4].external_id][0]["Debit"] == shown(OTHER_KIND, D(2))


def test_oracle_imports_each_row_as_a_new_actual_line_of_settleqs_source() -> None:
    _, rows = read(erp_journal.oracle_gl_csv(ENTRIES))
    for row, (e, is_debit) in zip(rows, _lines(ENTRIES), strict=True):
        assert row["STATUS"] == "NEW"
        assert row["USER_JE_SOURCE_NAME"] == "settleq"
        assert row["USER_JE_CATEGORY_NAME"] == erp_journal.ORACLE_CATEGORY
        assert row["ACTUAL_FLAG"] == "A"
        assert row["LEDGER_NAME"] == e.entity
        assert row["CURRENCY_CODE"] == e.currency
        assert dt.datetime.strptime(row["ACCOUNTING_DATE"], "%Y/%m/%d").date() == CLOSE
        assert row["DATE_CREATED"] == row["ACCOUNTING_DATE"]
        assert (row["ENTERED_DR"] == "") != (row["ENTERED_CR"] == "")
        assert (row["ENTERED_DR"] != "") is is_debit
        assert row["REFERENCE1"] == f"settleq {PERIOD}"
        assert row["REFERENCE5"] == row["REFERENCE10"] == e.memo
        assert row["REFERENCE21"] == e.external_id
        assert row["REFERENCE22"] == cell(e.counterparty)
        account = e.debit if is_debit else e.credit
        segments = [row[f"SEGMENT{n}"] for n in range(1, erp_journal.ORACLE_SEGMENTS + 1)]
        code = account.split(" ")[0].split("-")
        assert segments == code + [""] * (erp_journal.ORACLE_SEGMENTS - len(code))


def test_oracle_takes_an_accounts_segments_in_order() -> None:
    segmented = replace(ENTRIES[3], debit="01-000-5100 Recipe cost", credit="01.000.2100")
    _, (debit, credit) = read(erp_journal.oracle_gl_csv([segmented]))
    assert [debit[f"SEGMENT{n}"] for n in range(1, 5)] == ["01", "000", "5100", ""]
    assert [credit[f"SEGMENT{n}"] for n in range(1, 5)] == ["01", "000", "2100", ""]
    # SAP's G/L account is a number of 10 characters at most: never a cut one.
    with pytest.raises(ValueError, match="G/L Account"):
        erp_journal.sap_csv([segmented])


def test_oracle_journals_and_currencies_balance() -> None:
    _, rows = read(erp_journal.oracle_gl_csv(ENTRIES))
    journals: dict[str, D] = defaultdict(D)
    currencies: dict[str, D] = defaultdict(D)
    for row in rows:
        net = amount(row["ENTERED_DR"]) - amount(row["ENTERED_CR"])
        journals[row["REFERENCE4"]] += net
        currencies[row["CURRENCY_CODE"]] += net
    assert len(journals) == len(ENTRIES), "two entries were merged into one journal"
    assert set(journals.values()) == {D(0)}
    assert set(currencies) == {"USD", "EUR"} and set(currencies.values()) == {D(0)}
    long_names = [name for name in journals if LONG_KEY[:40] in name]
    assert len(long_names) == 2
    assert all(len(n) == 100 and "~" in n for n in long_names)


def test_sap_documents_sum_to_zero_with_short_distinct_references() -> None:
    _, rows = read(erp_journal.sap_csv(ENTRIES))
    documents: dict[str, D] = defaultdict(D)
    for row, (e, is_debit) in zip(rows, _lines(ENTRIES), strict=True):
        signed = D(row["Amount in Transaction Currency"])
        assert (signed > 0) is is_debit
        assert abs(signed) == e.amount
        documents[row["Reference"]] += signed
        assert row["Reference"] == erp_journal.sap_reference(e.external_id)
        assert len(row["Reference"]) <= 16
        assert row["Item Text"] == e.external_id[:50]
        assert len(row["Header Text"]) <= 25 and len(row["Item Text"]) <= 50
        assert dt.datetime.strptime(row["Posting Date"], "%Y%m%d").date() == CLOSE
        assert row["Journal Entry Date"] == row["Posting Date"]
        assert row["Company Code"] == e.entity
        assert row["Transaction Currency"] == e.currency
        assert row["Journal Entry Type"] == "SA"
        assert row["G/L Account"] == (e.debit if is_debit else e.credit).split(" ")[0]
        assert row["Assignment"] == cell(e.counterparty)[:18]
    assert len(documents) == len(ENTRIES)
    assert set(documents.values()) == {D(0)}


def test_two_external_ids_never_share_a_sap_reference() -> None:
    ids = [external_id(PERIOD, DEDUCTION_KIND, f"{LONG_KEY}-{n}") for n in range(20_000)]
    references = {erp_journal.sap_reference(i) for i in ids}
    assert len(references) == len(ids)
    assert {len(r) for r in references} == {16}


def test_a_value_that_routes_money_is_refused_rather_than_cut() -> None:
    too_long = replace(ENTRIES[0], entity="US-EAST")  # a company code is 4 characters
    with pytest.raises(ValueError, match="Company Code"):
        erp_journal.sap_csv([too_long])
    assert erp_journal.netsuite_csv([too_long])  # a subsidiary's name has room


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="netsuite, oracle_gl, sap"):
        erp_journal.erp_csv("quickbooks", ENTRIES)


def test_a_cut_is_named_in_the_columns_and_nowhere_else() -> None:
    for fmt, columns in COLUMNS.items():
        assert fmt in FORMATS
        assert len({c.name for c in columns}) == len(columns)
        for column in columns:
            assert column.source
            assert column.fit == "whole" or column.max_length is not None


def _lines(entries: list[Entry]) -> list[tuple[Entry, bool]]:
    return [(e, is_debit) for e in entries for is_debit in (True, False)]


def test_the_clis_erp_choices_are_the_formats() -> None:
    from services.commands.finance.periods import ErpFormat

    assert tuple(f.value for f in ErpFormat) == erp_journal.FORMATS


def test_the_month_end_docs_name_every_column_its_source_and_its_cut() -> None:
    """The tables in docs/operations.md are COLUMNS, which writes the files:
    a column, source or length changed in one is changed in the other."""
    docs = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    for fmt, columns in COLUMNS.items():
        for c in columns:
            if c.name.startswith("SEGMENT"):
                assert "| `SEGMENT1`…`SEGMENT30` |" in docs and c.max_length == 25
                continue
            row = f"| `{c.name}` | {c.source} | {c.max_length or ''} |"
            assert row in docs, f"{fmt}: {row}"
