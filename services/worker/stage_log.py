"""The one log event of each unit of work at each worker stage (validate, settle,
dead_letter), written by the actor wrapper, never by the stages' hot loops.

A chunk message carries ids (job, chunk, kind), not the documents, so what a
chunk *holds* is learnt when the stage decodes it: the stage calls
``note_documents`` once per unit (one pass over its documents, never over its
lines). A chunk is a run of consecutive documents of one batch
(``shared/domain/pipeline/chunking.py``), not of one partition: when its documents share one
partition key, or one correlation id (a producer that sets one per batch), the
event carries it; when they hold several, the field is null and
``partitions`` / ``correlation_ids`` count them. A unit that was never decoded
(a redelivery stopped at its marker, a tampered message) has null fields and no
``documents``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from shared.domain.pipeline.units import ChunkOutcome
from shared.logs import only, stage_event

log = logging.getLogger("settleq.stage")


@dataclass
class ChunkFacts:
    documents: int | None = None
    partition_keys: set[str] = field(default_factory=set)
    correlation_ids: set[str] = field(default_factory=set)


# Set by the actor wrapper for the unit of work its thread runs, filled by the stage.
_current: ContextVar[ChunkFacts | None] = ContextVar("settleq_chunk_facts", default=None)


def note_documents(documents: Sequence[Any]) -> None:
    """Remember what the unit being processed holds (a no-op outside an actor)."""
    facts = _current.get()
    if facts is None:
        return
    facts.documents = len(documents)
    facts.partition_keys = {d.partition_key for d in documents}
    facts.correlation_ids = {d.correlation_id for d in documents if d.correlation_id}


def _text(raw: Any, name: str) -> str | None:
    # Read before the message is verified, so only short strings are kept.
    value = raw.get(name) if isinstance(raw, dict) else None
    return value[:64] if isinstance(value, str) else None


@dataclass
class UnitEvents:
    """The events of one delivery of a unit of work."""

    raw: Any
    attempt: int
    facts: ChunkFacts

    def emit(self, stage: str, started: float, level: int = logging.INFO, **extra: Any) -> None:
        facts = self.facts
        if facts.documents is not None:
            extra["documents"] = facts.documents
            extra["partitions"] = len(facts.partition_keys)
            extra["correlation_ids"] = len(facts.correlation_ids)
        dead_letter_id = self.raw.get("dead_letter_id") if isinstance(self.raw, dict) else None
        if isinstance(dead_letter_id, int):
            extra["requeue_of"] = dead_letter_id
        stage_event(
            log,
            stage,
            started=started,
            job_id=_text(self.raw, "job_id"),
            chunk_id=_text(self.raw, "chunk_id"),
            partition_key=only(facts.partition_keys),
            correlation_id=only(facts.correlation_ids),
            level=level,
            kind=_text(self.raw, "kind"),
            attempt=self.attempt,
            **extra,
        )


@contextmanager
def unit_events(raw: Any, attempt: int) -> Iterator[UnitEvents]:
    """Collect what the stage learns about the unit while it runs in this thread."""
    facts = ChunkFacts()
    token = _current.set(facts)
    try:
        yield UnitEvents(raw, attempt, facts)
    finally:
        _current.reset(token)


def outcome_fields(result: object) -> dict[str, Any]:
    """The settle stage's line counts, when this delivery committed an outcome."""
    if not isinstance(result, ChunkOutcome):
        return {}
    return {
        "lines": result.lines,
        "posted": result.posted,
        "disputed": result.disputed,
        "duplicate": result.duplicate,
        "dead_lettered": result.dead_lettered,
    }


def now() -> float:
    return time.perf_counter()
