"""The settle rules of a unit's new ledger rows, in Python, for every backend
(docs/architecture.md#the-settlement-transaction).

The first occurrence of every identity is written, round by round (round n
holds the n-th new row of each lineage: ``shared.adapters.db.ledger.priors``), each
measured from its lineage's newest row, including one an earlier round just
wrote: its ``delta`` and ``supersedes_id``. A line older than that row is
*late* (written nowhere, a duplicate ``newer_version_settled``); one whose
change does not fit the ledger's column is dead-lettered. Only the insert
itself differs by backend (``InsertRows``): the identity's partial unique
index decides what is new, never these rules.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection

from shared.adapters.db.ledger import priors
from shared.adapters.db.ledger.rows import ledger_row
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import DeltaBasis, Document
from shared.domain.pipeline.lineage import Standing
from shared.domain.pipeline.settlement import LEDGER_LIMIT, PlannedLine
from shared.domain.pipeline.units import ChunkRef, LedgerRow

Identity = tuple[str, int]  # (reconciliation key, contract version)

# A lineage's row taken without being written: its id, amount and document
# (its standing is made only when a later line of the lineage asks for it).
Carried = tuple[int, Decimal, Document]
# Read some lines' lineages' newest rows from the ledger (``priors.latest_rows``).
LatestRows = Callable[
    [Connection, str, DeltaBasis, Sequence[PlannedLine]], dict[priors.Lineage, priors.Newest]
]

# Insert fully made ledger rows (sorted by identity), ignoring a conflict on the
# identity's partial unique index; the ids of the rows it took, by identity.
InsertRows = Callable[[Connection, list[dict[str, Any]]], dict[Identity, int]]


@dataclass
class Written:
    """A unit's ledger rows as written: the new rows, and what became of the rest."""

    rows: list[LedgerRow] = field(default_factory=list)
    late: set[Identity] = field(default_factory=set)
    out_of_range: list[PlannedLine] = field(default_factory=list)
    # The claims of ledger rows that were already there, where the writing found
    # them (PostgreSQL's probes): a duplicate's is compared with its line's.
    claims: dict[Identity, Decimal | None] = field(default_factory=dict)

    def taken(self) -> set[Identity]:
        return {(r.reconciliation_key, r.contract_version) for r in self.rows}


def first_occurrences(settled: Sequence[PlannedLine]) -> list[PlannedLine]:
    first: dict[Identity, PlannedLine] = {}
    for p in settled:
        first.setdefault((p.line.reconciliation_key, p.document.contract_version), p)
    return list(first.values())


def write_rounds(
    conn: Connection,
    chunk: ChunkRef,
    settled: Sequence[PlannedLine],
    now: dt.datetime,
    period: str,
    repriced: set[str],
    insert: InsertRows,
    carried: dict[priors.Lineage, Carried] | None = None,
    latest_rows: LatestRows = priors.latest_rows,
) -> Written:
    """Write the first occurrence of every identity of ``settled``, round by round.

    ``carried``: lineages' newest rows that ``insert`` took without writing them
    (a preview's, ``ledger/preview.py``), which no read of the ledger finds: they
    come before the ledger's and gain this unit's. None when ``insert`` writes,
    and a later round reads what an earlier one wrote. ``latest_rows`` reads a
    round's lineages from the ledger (a preview keeps what it read)."""
    written = Written()
    basis = KINDS[chunk.kind].delta_basis
    for lines in priors.rounds(basis, first_occurrences(settled)):
        # Only a line that may have an earlier row reads its lineage (the rule
        # that also lets the common case take no lock: priors.may_have_prior).
        probed = [p for p in lines if priors.may_have_prior(basis, p, repriced)]
        latest = latest_rows(conn, chunk.kind, basis, probed) if probed else {}
        rows: dict[Identity, dict[str, Any]] = {}
        for p in lines:
            ident = (p.line.reconciliation_key, p.document.contract_version)
            newest = latest.get(priors.lineage(basis, p)) if latest else None
            if carried and (earlier := carried.get(priors.lineage(basis, p))) is not None:
                row_id, amount, document = earlier
                newest = priors.Newest(row_id, amount, Standing.of(document))
            if priors.older_than_newest(basis, p, newest):
                written.late.add(ident)
                continue
            row = ledger_row(p, chunk, newest, now, period)
            if abs(row["delta"]) >= LEDGER_LIMIT:
                # Its amount fits; its change from the last one does not.
                written.out_of_range.append(p)
            else:
                rows[ident] = row
        if not rows:
            continue
        # Sorted so that concurrent units sharing keys lock them in the same order.
        ids = insert(conn, [rows[ident] for ident in sorted(rows)])
        written.rows += [as_ledger_row(rows[ident], row_id) for ident, row_id in ids.items()]
        if carried is not None:
            for p in lines:
                ident = (p.line.reconciliation_key, p.document.contract_version)
                if (taken := ids.get(ident)) is not None:
                    carried[priors.lineage(basis, p)] = (taken, rows[ident]["amount"], p.document)
    written.rows.sort(key=lambda r: r.id)
    return written


def as_ledger_row(row: dict[str, Any], row_id: int) -> LedgerRow:
    return LedgerRow(
        row_id,
        row["reconciliation_key"],
        row["contract_version"],
        row["outcome"],
        row["kind"],
        row["job_id"],
        row["document_id"],
        row["line_ref"],
        row["partition_key"],
        row["correlation_id"],
        row["amount"],
        row["claimed_amount"],
        row["delta"],
        row["supersedes_id"],
        row["period"],
    )


def new_flags(settled: Sequence[PlannedLine], taken: set[Identity]) -> list[bool]:
    """For each settled line: is it the first occurrence of an identity the ledger
    took? (A repeat later in the unit, or an identity already there, is not.)"""
    fresh = set(taken)
    flags = []
    for p in settled:
        ident = (p.line.reconciliation_key, p.document.contract_version)
        flags.append(ident in fresh)
        fresh.discard(ident)
    return flags
