"""Units of work: what a worker settles in one transaction, and what came of it.

Plain values shared by the worker (which builds them from broker messages) and
the database adapter (which commits them), so neither reaches into the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from shared.domain.money import ZERO


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
