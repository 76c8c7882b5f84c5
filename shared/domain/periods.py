"""Booking periods, balances and the journal (docs/api.md#periods-and-the-close):
the pure part. A period's balances are summed in the database (adapters/db/periods/);
what they mean, the journal made of them and its bytes are decided here.

A balance's activity is six sums of ``delta`` that never overlap: ``posted``
and ``disputed`` (an identity's first row), ``repriced`` (a posted or disputed
row that supersedes an earlier version), ``resolved`` (a resolution row), and
a remittance's rows, ``deducted`` (a deduction matched to a document) and
``written_off`` (docs/architecture.md#remittances-and-deductions).
The journal books each (kind, partition_key)'s activity as one balanced entry:
a debit line and a credit line of the same amount on the kind's accounts,
swapped when the sum is negative. An outcome the kind has accounts of its own
for (disputed money by default, and a remittance's) is booked as an entry of
its own on them (docs/operations.md#configuration). Every line carries what
an ERP needs (``Heading``), fixed at the close (``MadeWith``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from shared.domain.kinds import KINDS, shown
from shared.domain.money import CENT, DEFAULT_CURRENCY, ZERO, at_quantum, plain
from shared.domain.pipeline.events import LEDGER_OUTCOMES
from shared.wire.cells import Cell, cell

# A period's name is a path segment of the API (/v1/periods/{period}/journal):
# "." and ".." would be read by every client as this folder and its parent,
# never as a period (RFC 3986's dot segments), so they name none.
NAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,32}$")
NAME_RULE = "1 to 32 characters of A-Z, a-z, 0-9, '.', '_' and '-', other than '.' and '..'"
ACTIVITY = ("posted", "disputed", "repriced", "resolved", "deducted", "written_off")
# The outcomes of a remittance's rows: each its own sum. Their delta takes
# money off a document.
MATCHES = ("deducted", "written_off")
# The outcomes a kind may book on accounts of their own, in their entries'
# order; the rest (``posted``, and any of these without) are booked together.
OWN = ("disputed", "resolved", *MATCHES)
_OUTCOMES = LEDGER_OUTCOMES


@dataclass(frozen=True)
class Booking:
    """The accounts a kind is journaled on: (debit, credit) for a positive
    balance, and for each of ``OWN`` it names, (debit, credit) for its rows'
    money: their sum of delta, or for ``MATCHES`` the money they took (minus
    their sum)."""

    debit: str
    credit: str
    outcomes: tuple[tuple[str, tuple[str, str]], ...] = ()

    def of(self, outcome: str) -> tuple[str, str] | None:
        """The accounts of ``outcome``'s own entry, or None: booked with the rest."""
        return dict(self.outcomes).get(outcome)

    def stored(self) -> list[Any]:
        """As periods.accounts keeps it: ``[debit, credit]``, and a third item,
        ``{outcome: [debit, credit]}``, only when an outcome has accounts of its
        own (so what was stored before those read the same)."""
        pair: list[Any] = [self.debit, self.credit]
        if self.outcomes:
            pair.append({o: list(accounts) for o, accounts in self.outcomes})
        return pair


# Each kind's accounts, or None: not journaled.
Accounts = Mapping[str, Booking | None]
# As given: a Booking, a bare (debit, credit) pair, or None.
Given = Mapping[str, Booking | tuple[str, str] | None]


def booking(
    debit: str, credit: str, outcomes: Mapping[str, tuple[str, str] | Sequence[str]] | None = None
) -> Booking:
    """A kind's accounts, its outcomes' in a stable order."""
    known = outcomes or {}
    unknown = sorted(set(known) - set(OWN))
    if unknown:
        raise ValueError(f"no outcome has accounts of its own but {', '.join(OWN)}: {unknown}")
    pairs = tuple((o, (known[o][0], known[o][1])) for o in OWN if o in known)
    return Booking(debit, credit, pairs)


def stored_booking(value: Any) -> Booking | None:
    """A kind's accounts as periods.accounts keeps them (``Booking.stored``)."""
    if not value:
        return None
    return booking(value[0], value[1], value[2] if len(value) > 2 else None)


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


def accounts(configured: Given | None) -> dict[str, Booking | None]:
    """Each kind's journal accounts: SETTLEQ_JOURNAL_ACCOUNTS's where it names
    the kind (None leaves the kind out; a bare pair has no outcome's own), else
    the kind's default, with its outcomes' defaults."""
    given = configured or {}
    found: dict[str, Booking | None] = {}
    for name, kind in sorted(KINDS.items()):
        if name in given:
            value = given[name]
            found[name] = value if not isinstance(value, tuple) else booking(*value)
        elif kind.journal_accounts is None:
            found[name] = None
        else:
            found[name] = booking(*kind.journal_accounts, kind.journal_outcome_accounts)
    return found


@dataclass(kw_only=True)
class Activity:
    """A period's six sums of delta and the rows they sum, and each ledger
    outcome's rows and sum of delta (``outcomes``: the journal entries of
    ``OWN``'s, and the rows of ``MATCHES`` that period_balances keeps)."""

    posted: Decimal = ZERO
    disputed: Decimal = ZERO
    repriced: Decimal = ZERO
    resolved: Decimal = ZERO
    deducted: Decimal = ZERO
    written_off: Decimal = ZERO
    rows: int = 0
    outcomes: dict[str, tuple[int, Decimal]] = field(default_factory=dict)

    @property
    def total(self) -> Decimal:
        return sum((self.sum_of(name) for name in ACTIVITY), ZERO)

    def sum_of(self, name: str) -> Decimal:
        """One of the ``ACTIVITY`` sums, by name."""
        if name not in ACTIVITY:
            raise ValueError(f"no activity is named {name!r}")
        value: Decimal = getattr(self, name)
        return value

    def rows_of(self, outcome: str) -> int:
        """The rows of ``outcome``."""
        return self.of_outcome(outcome)[0]

    @property
    def deducted_rows(self) -> int:
        return self.rows_of("deducted")

    @property
    def written_off_rows(self) -> int:
        return self.rows_of("written_off")

    def add(self, outcome: str, supersedes: bool, delta: Decimal, rows: int = 1) -> None:
        """``rows`` ledger rows of ``outcome`` summing ``delta``: into the sum
        ``activity_of`` says (an outcome it does not know is an error, never a
        sum of its own)."""
        name = activity_of(outcome, supersedes)
        setattr(self, name, self.sum_of(name) + delta)
        self.rows += rows
        count, total = self.outcomes.get(outcome, (0, ZERO))
        self.outcomes[outcome] = (count + rows, total + delta)

    def of_outcome(self, outcome: str) -> tuple[int, Decimal]:
        """The rows of ``outcome`` and their sum of delta."""
        return self.outcomes.get(outcome, (0, ZERO))

    def stored_outcomes(self) -> dict[str, list[Any]]:
        """``outcomes`` as period_balances.outcomes keeps them: exact decimal strings."""
        return {o: [rows, str(total)] for o, (rows, total) in sorted(self.outcomes.items())}

    def restore_outcomes(
        self, stored: Mapping[str, Sequence[Any]] | None, match_rows: Mapping[str, int]
    ) -> None:
        """``outcomes`` from period_balances; a period closed before they were
        kept has only ``MATCHES``' (all its journal could book apart then):
        ``match_rows`` (its columns) and their sums."""
        if stored is not None:
            self.outcomes = {o: (int(v[0]), Decimal(v[1])) for o, v in stored.items()}
            return
        self.outcomes = {o: (match_rows[o], self.sum_of(o)) for o in MATCHES if match_rows[o]}


@dataclass
class Balance:
    """One (kind, partition_key)'s balance over a period, or up to an instant."""

    kind: str
    partition_key: str
    opening: Decimal
    activity: Activity = field(default_factory=Activity)
    in_dispute_count: int = 0
    in_dispute_variance: Decimal = ZERO
    # Its contract's (one per partition: docs/api.md#contracts); "" until read.
    currency: str = ""

    @property
    def closing(self) -> Decimal:
        return self.opening + self.activity.total


def external_id(period: str, kind: str, partition_key: str, outcome: str | None = None) -> str:
    """An entry's id in the ERP: stable, so a second import is the same entry.
    An outcome's own entry (``MATCHES``) ends with the outcome."""
    base = f"settleq:{period}:{kind}:{partition_key}"
    return base if outcome is None else f"{base}:{outcome}"


def line_entry(
    period: str, booked_on: Accounts, kind: str, partition_key: str, outcome: str
) -> str | None:
    """The external_id of the entry a ledger row of ``outcome`` is booked in,
    or None when its kind is not journaled."""
    accounts = booked_on.get(kind)
    if accounts is None:
        return None
    own = outcome if accounts.of(outcome) is not None else None
    return external_id(period, kind, partition_key, own)


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
    # One of ``OWN`` booked on accounts of its own, or None: the rest.
    outcome: str | None = None
    # What an ERP needs on every line (docs/operations.md#the-month-end-close):
    # the date it is booked on, its currency (ISO 4217), the entity
    # (subsidiary, ledger or company code) and the partition's id in the ERP.
    accounting_date: dt.date | None = None
    currency: str = ""
    entity: str = ""
    counterparty: str = ""

    @property
    def memo(self) -> str:
        noun = KINDS[self.kind].partition_noun
        what = "" if self.outcome is None else f" {self.outcome}"
        return (
            f"settleq {self.kind} {noun} {self.partition_key}, period {self.period}{what}:"
            f" {self.rows} ledger rows"
        )


def entries(period: str, balances: Iterable[Balance], booked_on: Accounts) -> list[Entry]:
    """The journal of a period's balances, ordered by kind and partition: a kind
    mapped to None is left out, a balance without rows has no entry, and a
    negative sum swaps the sides. Each of ``OWN`` the kind has accounts of its
    own for is an entry of its own after the rest's, on those accounts: its
    rows' sum of delta, or for ``MATCHES`` the money they took (minus it)."""
    found = []
    for b in sorted(balances, key=lambda b: (b.kind, b.partition_key)):
        accounts = booked_on.get(b.kind)
        if accounts is None or not b.activity.rows:
            continue
        rest, rest_rows = b.activity.total, b.activity.rows
        own = []
        for outcome in OWN:
            pair = accounts.of(outcome)
            rows, taken = b.activity.of_outcome(outcome)
            if pair is None or not rows:
                continue
            rest -= taken
            rest_rows -= rows
            amount = -taken if outcome in MATCHES else taken
            own.append(_entry(period, b, pair, amount, rows, outcome))
        if rest_rows:
            found.append(_entry(period, b, (accounts.debit, accounts.credit), rest, rest_rows))
        found.extend(own)
    return found


def _entry(
    period: str,
    b: Balance,
    pair: tuple[str, str],
    amount: Decimal,
    rows: int,
    outcome: str | None = None,
) -> Entry:
    debit, credit = pair
    if amount < 0:
        debit, credit = credit, debit
    return Entry(
        external_id(period, b.kind, b.partition_key, outcome),
        period,
        b.kind,
        b.partition_key,
        debit,
        credit,
        amount.copy_abs(),
        rows,
        outcome,
        currency=b.currency,
    )


@dataclass(frozen=True)
class Heading:
    """What every line of a period's journal carries beside its entry's
    accounts: the date it is booked on, the entity (a subsidiary, ledger or
    company code), the currency of money whose contract names none, and each
    partition's id in the ERP (its counterparty). A closed period's is fixed at
    its close (periods.made_with), so its journal's bytes never change."""

    accounting_date: dt.date
    entity: str = ""
    currency: str = DEFAULT_CURRENCY
    counterparties: Mapping[str, str] = field(default_factory=dict)

    def stored(self) -> dict[str, Any]:
        return {
            "accounting_date": self.accounting_date.isoformat(),
            "entity": self.entity,
            "currency": self.currency,
            "counterparties": dict(sorted(self.counterparties.items())),
        }

    @classmethod
    def from_stored(cls, value: Mapping[str, Any]) -> Heading:
        return cls(
            dt.date.fromisoformat(value["accounting_date"]),
            value["entity"],
            value["currency"],
            dict(value["counterparties"]),
        )


@dataclass(frozen=True)
class Journaling:
    """How a journal is made today (docs/operations.md#configuration): each
    kind's accounts as given (``accounts``), the entity, the currency of
    contracts that name none, and the time zone its dates are in."""

    accounts: Given | None = None
    entity: str = ""
    currency: str = DEFAULT_CURRENCY
    tz: str = "UTC"

    def heading(self, date: dt.date, counterparties: Mapping[str, str]) -> Heading:
        return Heading(date, self.entity, self.currency, counterparties)


def accounting_date(
    ends_at: dt.datetime | None, closed_at: dt.datetime | None, now: dt.datetime, tz: dt.tzinfo
) -> dt.date:
    """The date a period's journal is booked on: a dated period's last day
    (in its time zone), else the day it was closed, else (a preview) today."""
    if ends_at is not None:
        return (ends_at.astimezone(tz) - dt.timedelta(microseconds=1)).date()
    return (closed_at or now).astimezone(tz).date()


def headed(found: Iterable[Entry], heading: Heading) -> list[Entry]:
    """``found``, each carrying ``heading``'s date, entity, counterparty and,
    where the entry names none of its own, currency."""
    return [
        replace(
            e,
            accounting_date=heading.accounting_date,
            currency=e.currency or heading.currency,
            entity=heading.entity,
            counterparty=heading.counterparties.get(e.partition_key, ""),
        )
        for e in found
    ]


# The journal's CSV: one row per journal line, lines sharing an external_id
# making one entry. The ERPs' own import files are shared/domain/erp_journal.py's
# (docs/operations.md#the-month-end-close).
JOURNAL_COLUMNS = (
    "external_id",
    "period",
    "accounting_date",
    "entity",
    "currency",
    "line",
    "account",
    "debit",
    "credit",
    "memo",
    "kind",
    "partition_key",
    "counterparty",
    "rows",
)
# A journal closed before its lines carried a date, entity, currency and
# counterparty keeps these columns: its bytes are the ones its close hashed.
UNHEADED_COLUMNS = tuple(
    c for c in JOURNAL_COLUMNS if c not in ("accounting_date", "entity", "currency", "counterparty")
)


_amount = shown


def journal_csv(found: Iterable[Entry], headed: bool = True) -> bytes:
    """The journal's CSV bytes: the same entries always give the same bytes.
    ``headed`` False: ``UNHEADED_COLUMNS``, as a period closed before had them."""
    columns = JOURNAL_COLUMNS if headed else UNHEADED_COLUMNS
    out = io.StringIO(newline="")
    out.write(",".join(columns) + "\r\n")
    for e in found:
        amount = _amount(e.kind, e.amount)
        for line, (account, debit, credit) in enumerate(
            ((e.debit, amount, ""), (e.credit, "", amount)), start=1
        ):
            cells = {
                "external_id": e.external_id,
                "period": e.period,
                "accounting_date": e.accounting_date.isoformat() if e.accounting_date else "",
                "entity": e.entity,
                "currency": e.currency,
                "line": str(line),
                "account": account,
                "debit": debit,
                "credit": credit,
                "memo": e.memo,
                "kind": e.kind,
                "partition_key": e.partition_key,
                "counterparty": e.counterparty,
                "rows": str(e.rows),
            }
            out.write(",".join(csv_cell(cells[c]) for c in columns) + "\r\n")
    return out.getvalue().encode()


def csv_cell(value: Cell) -> str:
    """One cell, neutralised (docs/api.md#csv-exports) and quoted when it must be:
    the journal's CSV and each ERP's import file (``erp_journal``) write theirs so."""
    shown = cell(value)
    if any(c in shown for c in ',"\r\n'):
        return '"' + shown.replace('"', '""') + '"'
    return shown


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def journal_json(
    period: str, final: bool, found: list[Entry], digest: str | None
) -> dict[str, object]:
    """The journal as JSON: its entries, each a debit line and a credit line,
    and its debits and credits per currency (never added across currencies:
    the top-level ``debits`` and ``credits`` are null when there are two)."""
    per: dict[str, Decimal] = {}
    for e in found:
        per[e.currency] = per.get(e.currency, ZERO) + e.amount
    total = plain(at_quantum(next(iter(per.values())), CENT)) if len(per) == 1 else None
    if not per:
        total = plain(at_quantum(ZERO, CENT))
    return {
        "period": period,
        "final": final,
        "sha256": digest,
        "entries": [
            {
                "external_id": e.external_id,
                "period": e.period,
                "accounting_date": e.accounting_date.isoformat() if e.accounting_date else None,
                "entity": e.entity,
                "currency": e.currency,
                "kind": e.kind,
                "partition_key": e.partition_key,
                "counterparty": e.counterparty or None,
                "outcome": e.outcome,
                "memo": e.memo,
                "rows": e.rows,
                "lines": [
                    {"account": e.debit, "debit": _amount(e.kind, e.amount), "credit": None},
                    {"account": e.credit, "debit": None, "credit": _amount(e.kind, e.amount)},
                ],
            }
            for e in found
        ],
        "debits": total,
        "credits": total,
        "totals": [
            {
                "currency": c,
                "debits": plain(at_quantum(t, CENT)),
                "credits": plain(at_quantum(t, CENT)),
            }
            for c, t in sorted(per.items())
        ],
    }


def activity_of(outcome: str, supersedes: bool) -> str:
    """Which of the six sums a row of ``outcome`` goes to: an outcome it does
    not know is refused, never summed under a name of its own."""
    if outcome not in _OUTCOMES:
        raise ValueError(f"a ledger row's outcome is one of {', '.join(_OUTCOMES)}: {outcome!r}")
    if outcome in ("resolved", *MATCHES):
        return outcome
    return "repriced" if supersedes else outcome
