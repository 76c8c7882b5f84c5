"""What a preview answers, from the lines settlement would leave: pure
(docs/architecture.md#previews).

A preview's lines come from the ledger writer's own rules
(shared/adapters/db/ledger/preview.py); here they are counted and summed, per
partition and in all, compared per document with what the ledger holds now
(a contract preview), and given a digest: the same lines give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Context, Decimal, localcontext
from typing import Any

from shared.domain.money import ZERO

OUTCOMES = ("posted", "disputed", "duplicate", "dead_lettered")
# Exact sums: the default 28 digits could round a large total.
_EXACT = Context(prec=60)


@dataclass(frozen=True, slots=True)
class PreviewLine:
    """One line as settlement would leave it: its outcome, the reason (a
    duplicate's, a dead letter's, a noted line's), its amount, and the change
    its ledger row would move (``delta``; None where nothing is written)."""

    partition_key: str
    document_id: str | None
    line_ref: str | None
    position: int | None
    contract_version: int | None
    outcome: str
    reason: str | None
    amount: Decimal | None
    claimed_amount: Decimal | None
    delta: Decimal | None
    lines: int = 1  # a dead letter of a document that could not be read covers several

    def wire(self) -> dict[str, Any]:
        return {
            "partition_key": self.partition_key,
            "document_id": self.document_id,
            "line_ref": self.line_ref,
            "position": self.position,
            "contract_version": self.contract_version,
            "outcome": self.outcome,
            "reason": self.reason,
            "amount": _text(self.amount),
            "claimed_amount": _text(self.claimed_amount),
            "delta": _text(self.delta),
            **({"lines": self.lines} if self.lines != 1 else {}),
        }


@dataclass
class Totals:
    """Lines per outcome, and the money: what posts (its amounts), what is
    disputed (its claims), and what moves in the ledger (the new rows' deltas,
    per outcome)."""

    lines: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    amount_posted: Decimal = ZERO
    amount_disputed: Decimal = ZERO  # the disputed lines' claims
    delta_posted: Decimal = ZERO
    delta_disputed: Decimal = ZERO

    def add(self, line: PreviewLine) -> None:
        self.lines += line.lines
        self.outcomes[line.outcome] += line.lines
        with localcontext(_EXACT):
            if line.outcome == "posted":
                self.amount_posted += line.amount or ZERO
                self.delta_posted += line.delta or ZERO
            elif line.outcome == "disputed":
                self.amount_disputed += line.claimed_amount or ZERO
                self.delta_disputed += line.delta or ZERO

    @property
    def delta(self) -> Decimal:
        with localcontext(_EXACT):
            return self.delta_posted + self.delta_disputed

    def wire(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            **self.outcomes,
            "amount_posted": str(self.amount_posted),
            "amount_disputed": str(self.amount_disputed),
            "delta_posted": str(self.delta_posted),
            "delta_disputed": str(self.delta_disputed),
            "delta": str(self.delta),
        }


def totals(lines: Iterable[PreviewLine]) -> tuple[Totals, dict[str, Totals]]:
    """All lines' totals, and each partition's (by partition key)."""
    whole = Totals()
    parts: dict[str, Totals] = {}
    for line in lines:
        whole.add(line)
        parts.setdefault(line.partition_key, Totals()).add(line)
    return whole, dict(sorted(parts.items()))


@dataclass(frozen=True, slots=True)
class Now:
    """What the ledger holds now for a line's lineage: its newest row's amount
    and outcome (``posted``, ``disputed``, ``resolved``), or nothing yet."""

    amount: Decimal
    outcome: str


NOTHING = "none"  # a line's outcome now, when its lineage has no row yet


@dataclass
class DocumentChange:
    """A document's money now and under the preview, what moves, and its
    lines' outcome changes (``posted→disputed: n``)."""

    partition_key: str
    document_id: str
    lines: int = 0
    amount_now: Decimal = ZERO
    delta: Decimal = ZERO
    changes: dict[str, int] = field(default_factory=dict)

    @property
    def amount_preview(self) -> Decimal:
        with localcontext(_EXACT):
            return self.amount_now + self.delta

    def wire(self) -> dict[str, Any]:
        return {
            "partition_key": self.partition_key,
            "document_id": self.document_id,
            "lines": self.lines,
            "amount_now": str(self.amount_now),
            "amount_preview": str(self.amount_preview),
            "delta": str(self.delta),
            "changes": dict(sorted(self.changes.items())),
        }


def document_changes(
    lines: Iterable[PreviewLine], now: Mapping[tuple[str, str, str], Now]
) -> list[DocumentChange]:
    """Per document (in first-seen order): ``now`` is each line's lineage's
    newest row by (partition, document, line_ref). A line that writes a row
    moves its delta; one that writes nothing (a duplicate, a late version, a
    dead letter) leaves the ledger as it is. An outcome change is counted where
    the line's outcome under the preview is not its outcome now."""
    out: dict[tuple[str, str], DocumentChange] = {}
    with localcontext(_EXACT):
        for line in lines:
            if line.document_id is None:
                continue
            doc = out.setdefault(
                (line.partition_key, line.document_id),
                DocumentChange(line.partition_key, line.document_id),
            )
            doc.lines += line.lines
            held = now.get((line.partition_key, line.document_id, line.line_ref or ""))
            doc.amount_now += held.amount if held else ZERO
            if line.delta is not None:
                doc.delta += line.delta
            if line.outcome == "duplicate":
                continue  # nothing moves: it stays as it is
            was = held.outcome if held else NOTHING
            if was != line.outcome:
                change = f"{was}→{line.outcome}"
                doc.changes[change] = doc.changes.get(change, 0) + line.lines
    return list(out.values())


def change_totals(docs: Iterable[DocumentChange]) -> dict[str, dict[str, Any]]:
    """Per partition: documents, lines, money now and under the preview, what
    moves, and the outcome changes."""
    parts: dict[str, dict[str, Any]] = {}
    with localcontext(_EXACT):
        for d in docs:
            part = parts.setdefault(
                d.partition_key,
                {"documents": 0, "lines": 0, "now": ZERO, "delta": ZERO, "changes": {}},
            )
            part["documents"] += 1
            part["lines"] += d.lines
            part["now"] += d.amount_now
            part["delta"] += d.delta
            for change, n in d.changes.items():
                part["changes"][change] = part["changes"].get(change, 0) + n
        return {
            key: {
                "documents": part["documents"],
                "lines": part["lines"],
                "amount_now": str(part["now"]),
                "amount_preview": str(part["now"] + part["delta"]),
                "delta": str(part["delta"]),
                "changes": dict(sorted(part["changes"].items())),
            }
            for key, part in sorted(parts.items())
        }


def digest(answer: Mapping[str, Any]) -> str:
    """The answer's digest: its canonical JSON's SHA-256 (keys sorted, no
    spaces), so the same preview of the same ledger gives the same bytes."""
    text = json.dumps(answer, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)
