"""Plan a chunk's settlement: pure, no I/O.

Given decoded documents and the contracts that exist, decide for every line
whether it settles (and to what) or is dead-lettered, and with which reason.
Whether a settled line posts or is a duplicate is decided later, by the
ledger's unique constraint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shared.errors import BusinessError
from shared.kinds.base import Document, Kind, Line, Settlement

# NUMERIC(20,4) holds 16 integer digits.
LEDGER_LIMIT = Decimal(10) ** 16


@dataclass(frozen=True, slots=True)
class PlannedLine:
    document: Document
    line: Line
    settlement: Settlement | None  # None: dead-lettered with ``reason``
    reason: str | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class DocumentFailure:
    """Every line of the document is dead-lettered under one reason."""

    document: Document
    lines: list[Line]
    reason: str
    message: str
    error_class: str = "BusinessError"


@dataclass
class ChunkPlan:
    lines: list[PlannedLine] = field(default_factory=list)
    failed_documents: list[DocumentFailure] = field(default_factory=list)

    def claim_keys(self) -> list[tuple[str, int]]:
        """(reconciliation_key, contract_version) of every line that may post."""
        return sorted(
            {
                (p.line.reconciliation_key, p.document.contract_version)
                for p in self.lines
                if p.settlement is not None
            }
        )


def plan_chunk(
    kind: Kind[Any, Any],
    documents: Sequence[Document],
    contracts: Mapping[tuple[str, int], Any],
) -> ChunkPlan:
    plan = ChunkPlan()
    for document in documents:
        lines = kind.lines(document)
        contract = contracts.get((document.partition_key, document.contract_version))
        if contract is None:
            plan.failed_documents.append(
                DocumentFailure(
                    document,
                    lines,
                    "unknown_contract_version",
                    f"no {kind.name} contract {document.partition_key} "
                    f"version {document.contract_version}",
                )
            )
            continue
        for line in lines:
            try:
                settlement = kind.settle(document, line, contract)
                if abs(settlement.amount) >= LEDGER_LIMIT:
                    raise BusinessError(
                        "amount_out_of_range", "the modelled amount does not fit the ledger"
                    )
            except BusinessError as exc:
                plan.lines.append(PlannedLine(document, line, None, exc.reason, str(exc)))
            else:
                plan.lines.append(PlannedLine(document, line, settlement))
    return plan


def plan_failure(
    kind: Kind[Any, Any],
    documents: Sequence[Document],
    reason: str,
    error_class: str,
    message: str,
) -> ChunkPlan:
    """Dead-letter every document of a chunk (e.g. ``retries_exhausted``)."""
    return ChunkPlan(
        failed_documents=[
            DocumentFailure(d, kind.lines(d), reason, message, error_class) for d in documents
        ]
    )
