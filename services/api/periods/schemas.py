"""Periods, balances, journals and statements on the wire. Amounts are
strings at their kind's quantum (a recipe's are unit costs: shown, never
summed with money)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.adapters.db.periods.reads import Summary
from shared.domain.kinds import KINDS, shown
from shared.domain.periods import Balance, PeriodName, activity_of
from shared.domain.pipeline.events import LedgerOutcome
from shared.wire.times import iso


class Total(BaseModel):
    kind: str
    outcome: LedgerOutcome
    currency: str | None = Field(
        default=None,
        description="ISO 4217: totals are per currency, never added across two (null in a"
        " period closed before they were).",
    )
    rows: int
    delta: str


class CarriedDisputes(BaseModel):
    kind: str
    currency: str | None = Field(default=None, description="ISO 4217 (null: closed before).")
    count: int
    variance: str  # claimed − model, summed


class WaitingDeadLetters(BaseModel):
    kind: str
    count: int
    lines: int


class Carried(BaseModel):
    """What a closed period carries over: the disputes open at its close and
    the dead letters waiting."""

    disputes: list[CarriedDisputes]
    dead_letters: list[WaitingDeadLetters]


class Period(BaseModel):
    name: str
    status: Literal["open", "ended", "closed"] = Field(
        description="`ended`: a dated period past its `ends_at`, booking nothing, not yet closed."
    )
    starts_at: str | None = Field(
        default=None, description="A dated period's start (inclusive); null when manual."
    )
    ends_at: str | None = Field(
        default=None, description="A dated period's end (exclusive); null when manual."
    )
    ended_at: str | None = Field(default=None, description="When its cut at `ends_at` was made.")
    opened_at: str
    closed_at: str | None
    closed_by: str | None = Field(description="The closing operator token's fingerprint.")
    note: str | None
    next: str | None = Field(description="The period its close opened.")
    rows: int
    totals: list[Total] = Field(description="The sum of `delta` per kind, outcome and currency.")
    carried: Carried | None = Field(description="A closed period's carry-over; null when open.")
    journal_sha256: str | None = Field(
        description="A closed period's: the SHA-256 of its journal's CSV bytes."
    )


class PeriodPage(BaseModel):
    items: list[Period]
    next_cursor: str | None = None


def period(s: Summary) -> Period:
    return Period(
        name=s.name,
        status=s.status,
        starts_at=iso(s.starts_at),
        ends_at=iso(s.ends_at),
        ended_at=iso(s.ended_at),
        opened_at=iso(s.opened_at) or "",
        closed_at=iso(s.closed_at),
        closed_by=s.closed_by,
        note=s.note,
        next=s.next,
        rows=s.rows,
        totals=[Total(**t) for t in s.totals],
        carried=None if s.carried is None else Carried(**s.carried),
        journal_sha256=s.journal_sha256,
    )


class CloseRequest(BaseModel):
    model_config = {"extra": "forbid"}

    period: str = Field(
        min_length=1, max_length=32, description="The open period, named: the close's guard."
    )
    next: PeriodName | None = Field(
        default=None,
        description="The period to open: required to close an open (manual) period; for an"
        " ended one, optional, and if given the period its cut opened.",
    )
    note: str | None = Field(default=None, max_length=2000)


class InDispute(BaseModel):
    count: int
    variance: str = Field(description="The open disputes' claimed − model, summed.")


class BalanceItem(BaseModel):
    kind: str
    partition_key: str
    currency: str = Field(description="ISO 4217: its contract's (one per partition).")
    direction: Literal["owed_to_us", "owed_by_us"] | None = Field(
        description="Who owes a positive closing balance: the partition (`owed_to_us`),"
        " settleq's owner (`owed_by_us`), or nobody (a recipe's unit costs)."
    )
    opening: str
    posted: str
    disputed: str
    repriced: str
    resolved: str
    deducted: str = Field(
        description="The sum of `delta` of deductions matched to documents (money taken: negative)."
    )
    written_off: str = Field(
        description="The sum of `delta` of write-offs: an excess within tolerance, or a"
        " deduction accepted by a decision (negative)."
    )
    closing: str
    rows: int
    in_dispute: InDispute


class BalancePage(BaseModel):
    period: str | None = Field(description="The period, or null for a balance `as_of` an instant.")
    final: bool = Field(description="Whether the period is closed: its balances never change.")
    status: Literal["open", "ended", "closed"] | None = Field(
        default=None,
        description="The period's: an ended one's balances no longer change, but it is not"
        " closed yet; null for a balance `as_of` an instant.",
    )
    as_of: str | None
    items: list[BalanceItem]
    next_cursor: str | None = None


def balance(b: Balance) -> BalanceItem:
    k = b.kind
    a = b.activity
    return BalanceItem(
        kind=k,
        partition_key=b.partition_key,
        currency=b.currency,
        direction=KINDS[k].direction if k in KINDS else None,
        opening=shown(k, b.opening),
        posted=shown(k, a.posted),
        disputed=shown(k, a.disputed),
        repriced=shown(k, a.repriced),
        resolved=shown(k, a.resolved),
        deducted=shown(k, a.deducted),
        written_off=shown(k, a.written_off),
        closing=shown(k, b.closing),
        rows=a.rows,
        in_dispute=InDispute(count=b.in_dispute_count, variance=shown(k, b.in_dispute_variance)),
    )


class JournalLine(BaseModel):
    account: str
    debit: str | None
    credit: str | None


class JournalEntry(BaseModel):
    external_id: str
    period: str
    accounting_date: dt.date | None = Field(
        description="The date its lines are booked on: a dated period's last day, else the"
        " close's date (the preview's: today)."
    )
    entity: str = Field(description="SETTLEQ_JOURNAL_ENTITY: a subsidiary, ledger or company code.")
    currency: str = Field(description="ISO 4217.")
    kind: str
    partition_key: str
    counterparty: str | None = Field(
        description="The partition's id in the ERP (`PUT /v1/partitions/{partition_key}`)."
    )
    outcome: Literal["disputed", "resolved", "deducted", "written_off"] | None = Field(
        description="An outcome booked on accounts of its own (its `external_id` ends with"
        " it); null for the rest of the (kind, partition)'s activity."
    )
    memo: str
    rows: int
    lines: list[JournalLine]


class JournalTotal(BaseModel):
    currency: str
    debits: str
    credits: str


class Journal(BaseModel):
    period: str
    final: bool
    sha256: str | None
    entries: list[JournalEntry]
    debits: str | None = Field(description="Null when the entries are in two currencies or more.")
    credits: str | None = Field(description="Null when the entries are in two currencies or more.")
    totals: list[JournalTotal] = Field(description="Debits and credits per currency.")


class StatementLine(BaseModel):
    id: int
    line_ref: str
    outcome: str
    activity: str = Field(
        description="Which of the balances' sums the row is in: posted, disputed, repriced"
        " (a posted or disputed row that supersedes an earlier version), resolved, or the"
        " outcome of a remittance's row (deducted, written_off)"
    )
    contract_version: int
    amount: str
    claimed_amount: str | None
    delta: str
    supersedes_id: int | None
    correlation_id: str | None
    reconciliation_key: str
    job_id: str
    created_at: str


class StatementDocument(BaseModel):
    document_id: str
    lines: list[StatementLine]
    total: str = Field(description="The sum of its lines' deltas.")


class StatementSection(BaseModel):
    kind: str
    currency: str = Field(description="ISO 4217: its contract's, every amount's in the section.")
    direction: Literal["owed_to_us", "owed_by_us"] | None
    opening: str
    documents: list[StatementDocument]
    closing: str
    in_dispute: InDispute
    owed: str | None = Field(
        description="Who owes the closing balance, in words; null for a recipe's unit costs."
    )


class Statement(BaseModel):
    partition_key: str
    period: str
    final: bool
    sections: list[StatementSection]


def statement_line(r: Any) -> StatementLine:
    k = r.kind
    return StatementLine(
        id=r.id,
        line_ref=r.line_ref,
        outcome=r.outcome,
        activity=activity_of(r.outcome, r.supersedes_id is not None),
        contract_version=r.contract_version,
        amount=shown(k, r.amount),
        claimed_amount=None if r.claimed_amount is None else shown(k, r.claimed_amount),
        delta=shown(k, r.delta),
        supersedes_id=r.supersedes_id,
        correlation_id=r.correlation_id,
        reconciliation_key=r.reconciliation_key,
        job_id=r.job_id,
        created_at=iso(r.created_at) or "",
    )


class PartitionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    erp_counterparty: str | None = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
        description=(
            "The id the partition's vendor, carrier or recipe has in the ERP the journal"
            " is imported into (a NetSuite entity, an Oracle third party, a SAP"
            " business partner); null: none"
        ),
    )


class Partition(BaseModel):
    partition_key: str
    erp_counterparty: str | None
    updated_at: str
