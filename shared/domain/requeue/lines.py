"""A requeued line-level dead letter re-runs its one line, never its neighbours
(docs/api.md#dead-letters-and-the-audit-log): pure, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from shared.domain.kinds.base import Line
from shared.domain.pipeline.settlement import ChunkPlan, DocumentFailure


def _the_line(
    lines: Sequence[Line], line_ref: str, line_index: int | None, key: str | None
) -> int | None:
    """The position of the one line a line-level dead letter names.

    By its position when the dead letter recorded it; otherwise (a dead letter
    stored before positions were) the first line with its ``line_ref`` and, when
    known, its reconciliation key: a document may repeat a ``line_no``, and a
    requeue must never re-run a line that already has its outcome.
    """
    if line_index is not None:
        ok = 0 <= line_index < len(lines) and lines[line_index].line_ref == line_ref
        return line_index if ok else None
    for index, line in enumerate(lines):
        if line.line_ref == line_ref and (key is None or line.reconciliation_key == key):
            return index
    return None


def restrict_to_line(
    plan: ChunkPlan, line_ref: str, line_index: int | None = None, key: str | None = None
) -> ChunkPlan:
    """Keep only the one line a requeued line-level dead letter names (the plan is
    of that dead letter's document): at most one line, whatever the document holds."""
    lines = [p.line for p in plan.lines]
    kept = _the_line(lines, line_ref, line_index, key)
    restricted = ChunkPlan(lines=[plan.lines[kept]] if kept is not None else [])
    for f in plan.failed_documents[:1]:
        index = _the_line(f.lines, line_ref, line_index, key)
        restricted.failed_documents.append(
            DocumentFailure(
                f.document,
                [f.lines[index]] if index is not None else [],
                f.reason,
                f.message,
                f.error_class,
                line_count=1,
                payload=f.payload,
                document_id=f.document_id,
                partition_key=f.partition_key,
                line_ref=line_ref,
                line_index=index if index is not None else line_index,
                position=None if f.position is None or index is None else f.position + index,
            )
        )
    return restricted
