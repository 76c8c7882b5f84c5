"""The journal as each ERP's documented import file (docs/operations.md#the-month-end-close):
the same entries as ``periods.journal_csv``, one row per journal line, in the
columns NetSuite, Oracle Fusion General Ledger or SAP S/4HANA read.

``COLUMNS`` is the one place each column's source and documented length are
said, and the writers are driven by it, so the docs' "column → source" tables
and the list of cuts cannot drift from the bytes. A value longer than its
column is handled as the column's ``fit`` says:

- ``cut``: a text an accountant reads; its first ``max_length`` characters.
- ``short``: an identifier the ERP groups lines by; a plain cut could give two
  entries the same id and merge them, so a longer one keeps a prefix and ends
  with ``~`` and a hash of the whole (``short_id``).
- ``whole``: a value that routes money (ledger, company code, account,
  currency, amount); a cut one would book to somewhere else, so it is refused
  with ``ValueError`` instead.

Every file is a pure function of its entries: no clock (a "date created"
column takes the accounting date), CRLF line ends, and cells neutralised and
quoted as the journal's CSV does (``periods.csv_cell``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal, NamedTuple

from shared.domain.kinds import shown
from shared.domain.periods import Entry, csv_cell
from shared.wire.cells import Cell, cell

FORMATS = ("netsuite", "oracle_gl", "sap")

Fit = Literal["cut", "short", "whole"]


class Line(NamedTuple):
    """One journal line of an entry: its debit line or its credit line."""

    entry: Entry
    debit: bool

    @property
    def account(self) -> str:
        return self.entry.debit if self.debit else self.entry.credit

    @property
    def amount(self) -> Decimal:
        """The amount at the kind's quantum, as every read shows it."""
        return Decimal(shown(self.entry.kind, self.entry.amount))

    @property
    def date(self) -> dt.date:
        if self.entry.accounting_date is None:
            raise ValueError(
                f"entry {self.entry.external_id} has no accounting_date: an ERP's import"
                " file needs a date on every line"
            )
        return self.entry.accounting_date


@dataclass(frozen=True)
class Column:
    """One column of an ERP's file: its header as the ERP's template names it,
    where its value comes from in settleq (for the docs), the length the ERP
    documents for it (None: none that a value here can reach) and what is done
    with a longer value (see the module's docstring)."""

    name: str
    source: str
    max_length: int | None
    fit: Fit = "whole"
    value: Callable[[Line], Cell] = field(compare=False, repr=False, kw_only=True)


def short_id(text: str, length: int) -> str:
    """``text`` in at most ``length`` characters, still telling two ids apart:
    itself when it fits, else its head, ``~`` and 16 hex digits (64 bits) of its
    SHA-256."""
    if len(text) <= length:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return text[: length - len(digest) - 1] + "~" + digest


def sap_reference(external_id: str) -> str:
    """An entry's SAP Reference (XBLNR, 16 characters): ``SQ`` and 14 hex
    digits (56 bits) of the SHA-256 of its external_id. An external_id never
    fits 16 characters (``settleq:<period>:`` alone nearly fills them), so every
    one is hashed alike; settleq can recompute it from the external_id, and the
    Item Text carries the external_id itself (cut to 50)."""
    return "SQ" + hashlib.sha256(external_id.encode()).hexdigest()[:14].upper()


def account_code(account: str) -> str:
    """An account's code: its text up to the first space. settleq's accounts
    read ``<number> <name>`` (``1310 Vendor promotional receivable``), which
    NetSuite takes whole, but Oracle's segments and SAP's G/L account hold the
    number only."""
    return account.split(" ", 1)[0]


# Oracle's accounting key flexfield has at most 30 segments. An account code
# given as its segments joined by "-" or "." (Oracle's usual separators,
# 01-000-1310) fills SEGMENT1.. in order; a bare number fills SEGMENT1.
ORACLE_SEGMENTS = 30
ORACLE_SEGMENT_LENGTH = 25
_SEGMENT_SEPARATOR = re.compile(r"[-.]")


def _segment(n: int) -> Callable[[Line], Cell]:
    def value(line: Line) -> Cell:
        segments = _SEGMENT_SEPARATOR.split(account_code(line.account))
        if len(segments) > ORACLE_SEGMENTS:
            raise ValueError(
                f"account {line.account!r} has {len(segments)} segments; Oracle's accounting"
                f" flexfield has at most {ORACLE_SEGMENTS}"
            )
        return segments[n - 1] if n <= len(segments) else ""

    return value


def _debit(line: Line) -> Cell:
    return line.amount if line.debit else ""


def _credit(line: Line) -> Cell:
    return "" if line.debit else line.amount


# NetSuite's CSV Import of journal entries (Transactions > Financial > Make
# Journal Entries > Import): lines sharing an External ID make one entry, whose
# debits must equal its credits. Dates are read in the import's date format
# preference, which must be MM/DD/YYYY (NetSuite's US default) for this file.
# Debit and Credit are documented at 13 characters (10 digits, 2 decimals).
NETSUITE_DATE = "%m/%d/%Y"

# Oracle Fusion General Ledger's GL_INTERFACE, the table the Journal Import
# reads (the JournalImportTemplate's GL_INTERFACE sheet), by its column names.
# Journal Import makes a batch per REFERENCE1 and a journal per REFERENCE4
# within it; dates are YYYY/MM/DD as the template wants. The category is
# 'Adjustment', one of General Ledger's predefined categories, so a ledger
# needs no setup beyond the 'settleq' source; the account is given by its
# segments, not a CODE_COMBINATION_ID, since settleq knows no ledger's ids.
ORACLE_DATE = "%Y/%m/%d"
ORACLE_SOURCE = "settleq"
ORACLE_CATEGORY = "Adjustment"

# SAP S/4HANA's Upload General Journal Entries (app F2548), its template's
# fields by their labels (technical names in the comments). Lines sharing the
# header fields, which the Reference makes unique to an entry, make one journal
# entry; its amounts are signed (debit positive, credit negative) in the
# transaction currency and sum to zero. Dates are YYYYMMDD, SAP's internal date.
SAP_DATE = "%Y%m%d"
SAP_DOCUMENT_TYPE = "SA"  # G/L account document

COLUMNS: dict[str, tuple[Column, ...]] = {
    "netsuite": (
        Column("External ID", "external_id", None, value=lambda ln: ln.entry.external_id),
        Column(
            "Date",
            "accounting_date, MM/DD/YYYY",
            None,
            value=lambda ln: ln.date.strftime(NETSUITE_DATE),
        ),
        Column("Subsidiary", "entity", None, value=lambda ln: ln.entry.entity),
        Column("Currency", "currency", None, value=lambda ln: ln.entry.currency),
        Column("Account", "debit or credit account, whole", None, value=lambda ln: ln.account),
        Column("Debit", "amount, on the debit line", 13, value=_debit),
        Column("Credit", "amount, on the credit line", 13, value=_credit),
        Column("Memo", "memo", None, value=lambda ln: ln.entry.memo),
        Column("Name", "counterparty", None, value=lambda ln: ln.entry.counterparty),
    ),
    "oracle_gl": (
        Column("STATUS", "'NEW'", 50, value=lambda ln: "NEW"),
        Column("LEDGER_NAME", "entity", 30, value=lambda ln: ln.entry.entity),
        Column(
            "ACCOUNTING_DATE",
            "accounting_date, YYYY/MM/DD",
            None,
            value=lambda ln: ln.date.strftime(ORACLE_DATE),
        ),
        Column("USER_JE_SOURCE_NAME", f"'{ORACLE_SOURCE}'", 25, value=lambda ln: ORACLE_SOURCE),
        Column(
            "USER_JE_CATEGORY_NAME", f"'{ORACLE_CATEGORY}'", 25, value=lambda ln: ORACLE_CATEGORY
        ),
        Column("CURRENCY_CODE", "currency", 15, value=lambda ln: ln.entry.currency),
        Column(
            "DATE_CREATED",
            "accounting_date, YYYY/MM/DD (no clock: the same bytes on every export)",
            None,
            value=lambda ln: ln.date.strftime(ORACLE_DATE),
        ),
        Column("ACTUAL_FLAG", "'A' (actual)", 1, value=lambda ln: "A"),
        *(
            Column(
                f"SEGMENT{n}",
                f"segment {n} of the account's code (its text up to the first space,"
                " split on '-' or '.')",
                ORACLE_SEGMENT_LENGTH,
                value=_segment(n),
            )
            for n in range(1, ORACLE_SEGMENTS + 1)
        ),
        Column("ENTERED_DR", "amount, on the debit line", None, value=_debit),
        Column("ENTERED_CR", "amount, on the credit line", None, value=_credit),
        Column(
            "REFERENCE1",
            "batch name: 'settleq <period>'",
            100,
            "cut",
            value=lambda ln: f"settleq {ln.entry.period}",
        ),
        Column(
            "REFERENCE2",
            "batch description: 'settleq journal, period <period>'",
            240,
            "cut",
            value=lambda ln: f"settleq journal, period {ln.entry.period}",
        ),
        Column(
            "REFERENCE4",
            "journal entry name: external_id",
            100,
            "short",
            value=lambda ln: ln.entry.external_id,
        ),
        Column(
            "REFERENCE5",
            "journal entry description: memo",
            240,
            "cut",
            value=lambda ln: ln.entry.memo,
        ),
        Column(
            "REFERENCE10",
            "journal entry line description: memo",
            240,
            "cut",
            value=lambda ln: ln.entry.memo,
        ),
        Column(
            "REFERENCE21",
            "line reference 1: external_id, whole (REFERENCE4 may be shortened)",
            240,
            "short",
            value=lambda ln: ln.entry.external_id,
        ),
        Column(
            "REFERENCE22",
            "line reference 2: counterparty",
            240,
            "cut",
            value=lambda ln: ln.entry.counterparty,
        ),
    ),
    "sap": (
        Column("Company Code", "entity (BUKRS)", 4, value=lambda ln: ln.entry.entity),
        Column(
            "Journal Entry Type",
            f"'{SAP_DOCUMENT_TYPE}' (BLART)",
            2,
            value=lambda ln: SAP_DOCUMENT_TYPE,
        ),
        Column(
            "Journal Entry Date",
            "accounting_date, YYYYMMDD (BLDAT)",
            None,
            value=lambda ln: ln.date.strftime(SAP_DATE),
        ),
        Column(
            "Posting Date",
            "accounting_date, YYYYMMDD (BUDAT)",
            None,
            value=lambda ln: ln.date.strftime(SAP_DATE),
        ),
        Column(
            "Reference",
            "'SQ' and 14 hex digits of the SHA-256 of external_id (XBLNR)",
            16,
            value=lambda ln: sap_reference(ln.entry.external_id),
        ),
        Column(
            "Header Text",
            "'settleq <period>' (BKTXT)",
            25,
            "cut",
            value=lambda ln: f"settleq {ln.entry.period}",
        ),
        Column("Transaction Currency", "currency (WAERS)", 5, value=lambda ln: ln.entry.currency),
        Column(
            "G/L Account",
            "the account's code: its text up to the first space (HKONT)",
            10,
            value=lambda ln: account_code(ln.account),
        ),
        Column(
            "Amount in Transaction Currency",
            "amount, positive on the debit line, negative on the credit line (WRBTR)",
            None,
            value=lambda ln: ln.amount if ln.debit else -ln.amount,
        ),
        Column(
            "Item Text", "external_id (SGTXT)", 50, "cut", value=lambda ln: ln.entry.external_id
        ),
        Column(
            "Assignment", "counterparty (ZUONR)", 18, "cut", value=lambda ln: ln.entry.counterparty
        ),
    ),
}


def netsuite_csv(entries: Iterable[Entry]) -> bytes:
    """NetSuite's journal entry CSV import file of these entries."""
    return erp_csv("netsuite", entries)


def oracle_gl_csv(entries: Iterable[Entry]) -> bytes:
    """Oracle Fusion General Ledger's GL_INTERFACE rows of these entries."""
    return erp_csv("oracle_gl", entries)


def sap_csv(entries: Iterable[Entry]) -> bytes:
    """SAP S/4HANA's Upload General Journal Entries file of these entries."""
    return erp_csv("sap", entries)


def erp_csv(fmt: str, entries: Iterable[Entry]) -> bytes:
    """One of ``FORMATS`` as its CSV bytes: a header row, then each entry's
    debit line and credit line."""
    if fmt not in COLUMNS:
        raise ValueError(f"an ERP's journal format is one of {', '.join(FORMATS)}: {fmt!r}")
    columns = COLUMNS[fmt]
    out = io.StringIO(newline="")
    out.write(",".join(csv_cell(c.name) for c in columns) + "\r\n")
    for entry in entries:
        for line in (Line(entry, True), Line(entry, False)):
            out.write(",".join(_cell(c, line) for c in columns) + "\r\n")
    return out.getvalue().encode()


def _cell(column: Column, line: Line) -> str:
    raw = column.value(line)
    # The limit is the cell as the ERP reads it, neutralised (``cell`` adds a
    # leading "'" to a formula), so the neutralised text is what is fitted; a
    # prefix of it keeps its first character, so ``csv_cell`` leaves it as is.
    text = cell(raw)
    limit = column.max_length
    if limit is None or len(text) <= limit:
        return csv_cell(raw if isinstance(raw, Decimal) else text)
    if column.fit == "cut":
        return csv_cell(text[:limit])
    if column.fit == "short":
        return csv_cell(short_id(text, limit))
    raise ValueError(
        f"{column.name} holds at most {limit} characters: {text!r} of entry"
        f" {line.entry.external_id} does not fit, and a cut one would book elsewhere"
    )
