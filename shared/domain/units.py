"""Units of work: what a worker settles in one transaction, and what came of it.

Plain values shared by the worker (which builds them from broker messages) and
the database adapter (which commits them), so neither reaches into the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from shared.domain.money import ZERO

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

    @property
    def lines(self) -> int:
        return self.posted + self.disputed + self.duplicate + self.dead_lettered
