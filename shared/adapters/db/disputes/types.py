"""The value types of the dispute queue (``shared.adapters.db.disputes.queue``, which
re-exports them): what a dispute, its resolution and the queue's totals are."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from shared.domain.disputes import Decision, Status


@dataclass(frozen=True)
class Filter:
    """Which disputes; every field optional. ``status="all"`` means any status."""

    status: Status | Literal["all"] = "open"
    kind: str | None = None
    partition_key: str | None = None
    job_id: str | None = None
    min_abs_variance: Decimal | None = None  # abs(variance) >= this
    max_abs_variance: Decimal | None = None  # abs(variance) <= this (bulk resolve)
    opened_before: dt.datetime | None = None  # opened_at < this


@dataclass(frozen=True)
class Resolution:
    decision: Decision
    amount: Decimal
    note: str
    resolved_at: dt.datetime
    resolved_by: str  # the operator token's fingerprint
    ledger_entry_id: int  # the ``resolved`` ledger row


@dataclass(frozen=True)
class Dispute:
    id: int  # = ledger_entry_id: the disputed row
    ledger_entry_id: int
    kind: str
    partition_key: str
    job_id: str
    document_id: str
    line_ref: str
    reconciliation_key: str
    contract_version: int
    claimed_amount: Decimal
    model_amount: Decimal
    variance: Decimal  # claimed - model
    status: Status
    opened_at: dt.datetime
    resolution: Resolution | None


@dataclass(frozen=True)
class Totals:
    """One (status, kind) group of disputes: how many, and the sums of their amounts."""

    status: Status
    kind: str
    count: int
    claimed: Decimal
    model: Decimal
    variance: Decimal  # signed sum of claimed - model
    abs_variance: Decimal  # sum of abs(claimed - model): the money at stake


@dataclass(frozen=True)
class PartitionVariance:
    kind: str
    partition_key: str
    open_count: int
    open_variance: Decimal  # signed sum
    open_abs_variance: Decimal  # what the ranking is by


@dataclass(frozen=True)
class Stats:
    totals: list[Totals]  # every (status, kind) with at least one dispute
    top_partitions: list[PartitionVariance]  # the ten with the largest open abs variance
    oldest_open_at: dt.datetime | None  # opened_at of the oldest open dispute


@dataclass(frozen=True)
class Resolved:
    dispute: Dispute  # as it is after the call (status "resolved", with its resolution)
    created: bool  # False: an identical earlier resolution, answered again
