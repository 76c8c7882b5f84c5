"""The dispute queue in the ledger database
(docs/architecture.md#exactly-once-resolution).

INTERFACE STUB: the signatures and value types the API, CLI, dashboard,
metrics and bench code against. The implementation replaces every
``NotImplementedError`` without changing a signature (add, never change).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from sqlalchemy import Engine

from shared.domain.disputes import Decision, ResolveRequest, Status


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


def page(engine: Engine, where: Filter, *, after_id: int | None, limit: int) -> list[Dispute]:
    """Oldest first (ascending id); the cursor is the id of the last dispute seen."""
    raise NotImplementedError


def stream(engine: Engine, where: Filter) -> Iterator[Dispute]:
    """Every matching dispute, oldest first, read in batches from one server-side
    cursor: never all in memory (the CSV export of 100,000 disputes)."""
    raise NotImplementedError


def get(engine: Engine, dispute_id: int) -> Dispute | None:
    """None when no disputed ledger row has this id."""
    raise NotImplementedError


def stats(engine: Engine) -> Stats:
    raise NotImplementedError


def open_by_kind(engine: Engine) -> dict[str, tuple[int, Decimal]]:
    """Per kind: (open disputes, their abs variance sum), for /metrics."""
    raise NotImplementedError


def statuses(engine: Engine, ledger_entry_ids: list[int]) -> dict[int, Status]:
    """The dispute status of each of these disputed rows (a job's lines page)."""
    raise NotImplementedError


def resolve(engine: Engine, dispute_id: int, request: ResolveRequest, actor: str) -> Resolved:
    """Resolve one dispute, at most once whatever is repeated or raced: in one
    transaction the ``resolved`` ledger row, its outcome event (outbox), its
    resolution record and the audit entry ``dispute_resolve``.

    Raises ``LookupError`` for an unknown id, ``DisputeSuperseded`` for a
    superseded dispute, ``DisputeAlreadyResolved`` for a resolved one whose
    resolution differs (``same_resolution``); an identical one is answered
    again with ``created=False``."""
    raise NotImplementedError


def resolve_bulk(
    engine: Engine, where: Filter, request: ResolveRequest, limit: int, actor: str
) -> int:
    """Resolve up to ``limit`` open disputes matching ``where`` (oldest first) with
    one decision (``BULK_DECISIONS``), each exactly as ``resolve`` would; returns
    how many this call resolved (those resolved or superseded meanwhile are skipped)."""
    raise NotImplementedError
