"""Whether a requeued dead letter would only be dead-lettered again: pure, no I/O.

A requeue reruns a document at its *pinned* contract version (docs/architecture.md,
version pinning), never a newer one. So a document dead-lettered
``unknown_contract_version`` settles on requeue only once that very version is
published, and a line dead-lettered ``unknown_promo_tier`` only if its pinned
version prices the tier (it never will: a published version is immutable).
The front door asks this before it requeues (docs/api.md#dead-letters-and-the-audit-log)
and refuses a requeue in which no line would settle, naming the cause.

The answer is the settlement plan itself (``plan_chunk``, the code the worker
runs), over the dead letter's stored document and the contracts that exist now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Document
from shared.domain.pipeline.settlement import Decoded, decode_chunk, document_list, plan_chunk
from shared.domain.requeue.lines import restrict_to_line
from shared.errors import StructuralError

# Reasons a rerun cannot cure by itself, whatever exists now: its message or its
# work was at fault, not the data (a tampered message, attempts used up, a chunk
# that could not be read at all). Such letters are never refused.
NOT_JUDGED = frozenset({"signature_mismatch", "retries_exhausted"})


@dataclass(frozen=True)
class LetterWork:
    """What a requeue of one document- or line-level dead letter reruns."""

    kind: str
    payload: str  # its document, as stored
    lines: int
    line_ref: str | None = None  # set for a line-level dead letter
    line_index: int | None = None
    line_key: str | None = None


@dataclass(frozen=True)
class Cause:
    """Why a requeue would fail again: a reason code, its lines, one message."""

    reason: str
    lines: int
    message: str


def decode_letter(work: LetterWork) -> Decoded | None:
    """The letter's document (or its decoding failure); None for an unknown kind."""
    kind = KINDS.get(work.kind)
    if kind is None:
        return None
    payload = b"[" + work.payload.encode() + b"]"
    try:
        return decode_chunk(kind, document_list(kind), payload, work.lines)
    except StructuralError:
        return Decoded([], [])


def pinned(decoded: Decoded) -> set[tuple[str, int]]:
    """The (partition_key, contract_version) pairs the documents are settled with."""
    return {(d.partition_key, d.contract_version) for d in decoded.documents}


def would_fail_again(
    work: LetterWork, decoded: Decoded | None, contracts: Mapping[tuple[str, int], Any]
) -> list[Cause]:
    """The causes for which no line of the letter would settle if it were
    requeued now; empty when at least one line would (or when it cannot be
    judged here). ``contracts`` holds the parsed contracts of ``pinned``'s pairs
    that exist."""
    kind = KINDS.get(work.kind)
    if kind is None or decoded is None:
        return []
    documents: list[Document] = decoded.documents
    plan = plan_chunk(kind, documents, contracts)
    if work.line_ref is not None:
        plan = restrict_to_line(plan, work.line_ref, work.line_index, work.line_key)
    if any(p.settlement is not None for p in plan.lines):
        return []
    lines: Counter[str] = Counter()
    messages: dict[str, str] = {}
    for p in plan.lines:
        lines[p.reason or ""] += 1
        messages.setdefault(p.reason or "", p.message)
    for f in [*plan.failed_documents, *decoded.failures]:
        lines[f.reason] += f.covered or 1
        messages.setdefault(f.reason, f.message)
    return [Cause(reason, n, messages[reason][:500]) for reason, n in sorted(lines.items())]
