"""Units of work: what a worker settles in one transaction, and what came of it.

Plain values shared by the worker (which builds them from broker messages) and
the database adapter (which commits them), so neither reaches into the other.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import NamedTuple

from shared.domain.money import ZERO
from shared.domain.pipeline.settlement import ChunkPlan

# A line's position in its batch: its chunk's sequence number in the high bits,
# its ordinal in the chunk (documents in batch order, each document's lines in
# order) in the low ones. Ordered by position, a job's lines are in the order
# the batch had them, whichever chunk settled first (docs/api.md#jobs).
CHUNK_POSITION_BITS = 32


def chunk_start(seq: int) -> int:
    """The position of the first line of the chunk numbered ``seq`` (from 0)."""
    return seq << CHUNK_POSITION_BITS


@dataclass(frozen=True)
class Requeue:
    """A dead letter sent through settlement again (its ``number``-th requeue)."""

    dead_letter_id: int
    number: int
    lines: int  # the lines it held: they leave ``dead_lettered`` for their new outcome


@dataclass(frozen=True)
class ChunkRef:
    """One unit of work: a stored chunk, or a requeued dead letter of it."""

    chunk_id: str
    job_id: str
    kind: str
    lines: int
    requeue: Requeue | None = None

    @property
    def result_id(self) -> str:
        """The processed marker: one per chunk, one per requeue of a dead letter."""
        if self.requeue is None:
            return self.chunk_id
        return f"rq{self.requeue.dead_letter_id}.{self.requeue.number}"


@dataclass
class ChunkOutcome:
    posted: int = 0
    disputed: int = 0
    duplicate: int = 0
    dead_lettered: int = 0
    amount_posted: Decimal = ZERO
    amount_disputed: Decimal = ZERO
    claim_differs: int = 0  # of ``duplicate``: claims not their ledger row's

    @property
    def lines(self) -> int:
        return self.posted + self.disputed + self.duplicate + self.dead_lettered


@dataclass(frozen=True)
class Unit:
    """What a ledger writer commits: a unit of work, its plan, and the delivery
    attempt that settled it (a dead letter records it)."""

    ref: ChunkRef
    plan: ChunkPlan
    attempts: int


class LedgerRow(NamedTuple):
    """A ledger row as written: what its outcome event tells (shared/domain/pipeline/events.py
    makes the event of one, its fields in this order)."""

    id: int
    reconciliation_key: str
    contract_version: int
    outcome: str
    kind: str
    job_id: str
    document_id: str
    line_ref: str
    partition_key: str
    correlation_id: str | None
    amount: Decimal
    claimed_amount: Decimal | None
    delta: Decimal
    supersedes_id: int | None
    period: str  # the booking period (docs/api.md#periods-and-the-close)


@dataclass
class UnitResult:
    """What committing a unit wrote: its counters, every new ledger row in id
    order, and the outbox row listing them (None when there are none), stamped
    ``committed_at``: the unit's events are made from this, with no read back."""

    outcome: ChunkOutcome
    committed_at: dt.datetime
    rows: list[LedgerRow] = field(default_factory=list)
    outbox_id: int | None = None
