"""Booking periods, balances and the journal (docs/api.md#periods-and-the-close):
the pure part. A period's balances are summed in the database (adapters/db/periods/);
what they mean, the journal made of them and its bytes are decided here.

A balance's activity is four sums of ``delta`` that never overlap: ``posted``
and ``disputed`` (an identity's first row), ``repriced`` (a posted or disputed
row that supersedes an earlier version) and ``resolved`` (a resolution row).
The journal books each (kind, partition_key)'s activity as one balanced entry:
a debit line and a credit line of the same amount on the kind's accounts,
swapped when the sum is negative.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from shared.domain.kinds import KINDS, shown
from shared.domain.money import CENT, ZERO, at_quantum, plain
from shared.wire.cells import cell

# A period's name is a path segment of the API (/v1/periods/{period}/journal):
# "." and ".." would be read by every client as this folder and its parent,
# never as a period (RFC 3986's dot segments), so they name none.
NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,32}$")
NAME_RULE = "1 to 32 characters of A-Z, a-z, 0-9, '.', '_' and '-', other than '.' and '..'"
ACTIVITY = ("posted", "disputed", "repriced", "resolved")
# Accounts a kind is journaled on: (debit, credit) for a positive balance.
Accounts = Mapping[str, tuple[str, str] | None]


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a period, or None."""
    if NAME.fullmatch(name):
        return None
    return f"a period's name is {NAME_RULE}"


def _named(name: str) -> str:
    problem = name_problem(name)
    if problem is not None:
        raise PydanticCustomError("period_name_invalid", problem)
    return name


# A period's name wherever one is read (a body, a path, a query, the first
# period's setting): 422 ``period_name_invalid``. Published as a pattern with
# a look-ahead, which pydantic's own pattern engine does not run.
PeriodName = Annotated[
    str,
    AfterValidator(_named),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 32, "pattern": NAME.pattern}),
]


def first_period(configured: str | None, now: dt.datetime) -> str:
    """The first period's name: SETTLEQ_FIRST_PERIOD, else the UTC month of ``now``."""
    if configured:
        return configured
    return now.astimezone(dt.UTC).strftime("%Y-%m")


def accounts(configured: Accounts | None) -> dict[str, tuple[str, str] | None]:
    """Each kind's journal accounts: SETTLEQ_JOURNAL_ACCOUNTS's where it names
    the kind (None leaves the kind out), else the kind's default."""
    given = configured or {}
    return {name: given.get(name, kind.journal_accounts) for name, kind in sorted(KINDS.items())}


@dataclass
class Activity:
    """A period's four sums of delta, and the rows they sum."""

    posted: Decimal = ZERO
    disputed: Decimal = ZERO
    repriced: Decimal = ZERO
    resolved: Decimal = ZERO
    rows: int = 0

    @property
    def total(self) -> Decimal:
        return self.posted + self.disputed + self.repriced + self.resolved


@dataclass
class Balance:
    """One (kind, partition_key)'s balance over a period, or up to an instant."""

    kind: str
    partition_key: str
    opening: Decimal
    activity: Activity = field(default_factory=Activity)
    in_dispute_count: int = 0
    in_dispute_variance: Decimal = ZERO

    @property
    def closing(self) -> Decimal:
        return self.opening + self.activity.total


def external_id(period: str, kind: str, partition_key: str) -> str:
    """An entry's id in the ERP: stable, so a second import is the same entry."""
    return f"settleq:{period}:{kind}:{partition_key}"


@dataclass(frozen=True)
class Entry:
    """One balanced journal entry: ``amount`` debited to ``debit`` and credited to ``credit``."""

    external_id: str
    period: str
    kind: str
    partition_key: str
    debit: str
    credit: str
    amount: Decimal
    rows: int

    @property
    def memo(self) -> str:
        noun = KINDS[self.kind].partition_noun
        return (
            f"settleq {self.kind} {noun} {self.partition_key}, period {self.period}:"
            f" {self.rows} ledger rows"
        )


def entries(period: str, balances: Iterable[Balance], booked_on: Accounts) -> list[Entry]:
    """The journal of a period's balances, ordered by kind and partition: a kind
    mapped to None is left out, a balance without rows has no entry, and a
    negative sum swaps the sides."""
    found = []
    for b in sorted(balances, key=lambda b: (b.kind, b.partition_key)):
        pair = booked_on.get(b.kind)
        if pair is None or not b.activity.rows:
            continue
        debit, credit = pair
        total = b.activity.total
        if total < 0:
            debit, credit = credit, debit
        found.append(
            Entry(
                external_id(period, b.kind, b.partition_key),
                period,
                b.kind,
                b.partition_key,
                debit,
                credit,
                total.copy_abs(),
                b.activity.rows,
            )
        )
    return found


# The journal's CSV: one row per journal line, as a NetSuite journal entry
# import maps them (lines sharing an External ID make one entry), or Oracle
# General Ledger's GL_INTERFACE (docs/operations.md#the-month-end-close).
JOURNAL_COLUMNS = (
    "external_id",
    "period",
    "line",
    "account",
    "debit",
    "credit",
    "memo",
    "kind",
    "partition_key",
    "rows",
)


_amount = shown


def journal_csv(found: Iterable[Entry]) -> bytes:
    """The journal's CSV bytes: the same entries always give the same bytes."""
    out = io.StringIO(newline="")
    out.write(",".join(JOURNAL_COLUMNS) + "\r\n")
    for e in found:
        amount = _amount(e.kind, e.amount)
        for line, (account, debit, credit) in enumerate(
            ((e.debit, amount, ""), (e.credit, "", amount)), start=1
        ):
            cells = (
                e.external_id,
                e.period,
                str(line),
                account,
                debit,
                credit,
                e.memo,
                e.kind,
                e.partition_key,
                str(e.rows),
            )
            out.write(",".join(_csv(c) for c in cells) + "\r\n")
    return out.getvalue().encode()


def _csv(text: str) -> str:
    """One cell, neutralised (docs/api.md#csv-exports) and quoted when it must be."""
    shown = cell(text)
    if any(c in shown for c in ',"\r\n'):
        return '"' + shown.replace('"', '""') + '"'
    return shown


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def journal_json(
    period: str, final: bool, found: list[Entry], digest: str | None
) -> dict[str, object]:
    """The journal as JSON: its entries, each a debit line and a credit line."""
    total = sum((e.amount for e in found), ZERO)
    return {
        "period": period,
        "final": final,
        "sha256": digest,
        "entries": [
            {
                "external_id": e.external_id,
                "period": e.period,
                "kind": e.kind,
                "partition_key": e.partition_key,
                "memo": e.memo,
                "rows": e.rows,
                "lines": [
                    {"account": e.debit, "debit": _amount(e.kind, e.amount), "credit": None},
                    {"account": e.credit, "debit": None, "credit": _amount(e.kind, e.amount)},
                ],
            }
            for e in found
        ],
        "debits": plain(at_quantum(total, CENT)),
        "credits": plain(at_quantum(total, CENT)),
    }


def activity_of(outcome: str, supersedes: bool) -> str:
    """Which of the four sums a row of ``outcome`` goes to."""
    if outcome == "resolved":
        return "resolved"
    return "repriced" if supersedes else outcome
