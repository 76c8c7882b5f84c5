"""What a unit's lines came to: the counts of its ``ChunkOutcome``, and the
``line_outcomes`` rows the ledger does not describe (duplicates, noted lines,
dead-lettered lines, linked to the dead letters inserted here)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from decimal import Decimal, localcontext
from typing import Any

from sqlalchemy import Connection, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.ledger.rounds import Identity, Written
from shared.adapters.db.ledger.rows import document_dead_letter, line_dead_letter, outcome_row
from shared.adapters.db.tables import IDENTITY_OUTCOMES, dead_letters, ledger_entries
from shared.adapters.db.types import EXACT_SUMS, identity_key, identity_keys
from shared.domain.money import ZERO
from shared.domain.pipeline.lineage import CLAIMED_AMOUNT_DIFFERS, NEWER_VERSION_SETTLED
from shared.domain.pipeline.settlement import ChunkPlan, PlannedLine
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef


def duplicate_claims(
    conn: Connection, settled: Sequence[PlannedLine], new_flags: Sequence[bool], written: Written
) -> dict[Identity, Decimal | None]:
    """The ledger's claim of each duplicate's identity (but a late one's, which
    is judged by its newer version): from the rows this unit wrote (a repeat
    within it), from what the writing found (``written.claims``), else read in
    one query for all of them; empty, and no query, when the unit has none."""
    wanted: set[Identity] = set()
    for p, new in zip(settled, new_flags, strict=True):
        if not new:
            wanted.add((p.line.reconciliation_key, p.document.contract_version))
    wanted -= written.late
    if not wanted:
        return {}
    claims = {
        (r.reconciliation_key, r.contract_version): r.claimed_amount
        for r in written.rows
        if (r.reconciliation_key, r.contract_version) in wanted
    }
    claims.update({i: c for i, c in written.claims.items() if i in wanted})
    missing = wanted - claims.keys()
    if missing:
        # By key alone, which the identity's index finds (a key has a version
        # or two); the versions wanted are picked here.
        le = ledger_entries.c
        keys = identity_keys(sorted({key for key, _ in missing}), conn.dialect.name)
        query = select(le.reconciliation_key, le.contract_version, le.claimed_amount).where(
            identity_key(le.reconciliation_key).in_(keys),
            outcome_in(le.outcome, *IDENTITY_OUTCOMES),
        )
        claims.update({(r[0], r[1]): r[2] for r in conn.execute(query) if (r[0], r[1]) in missing})
    return claims


def settled_outcomes(
    chunk: ChunkRef,
    settled: Sequence[PlannedLine],
    new_flags: Iterable[bool],
    outcome: ChunkOutcome,
    deltas: Callable[[], Mapping[tuple[str, int], Decimal]],
    late: Collection[tuple[str, int]] = (),
    claims: Mapping[Identity, Decimal | None] | None = None,
) -> list[dict[str, Any]]:
    """Count the settled lines' outcomes (posted or disputed when new, else a
    duplicate), and build the outcome rows the ledger does not describe:
    duplicates (``newer_version_settled`` for an identity in ``late``;
    ``claimed_amount_differs``, with the ledger's claim, for one whose claim is
    not its ledger row's in ``claims``) and noted lines, with their rows'
    deltas (``deltas()``, asked for only when a line has a note). A posted or
    disputed line's outcome is its ledger row."""
    noted: Mapping[tuple[str, int], Decimal] | None = None
    rows = []
    # The chunk's sums, exact: the default 28 digits could round a large total.
    with localcontext(EXACT_SUMS):
        for p, new in zip(settled, new_flags, strict=True):
            s = p.settlement
            assert s is not None
            if new:
                if s.outcome == "posted":
                    outcome.posted += 1
                    outcome.amount_posted += s.amount
                else:
                    outcome.disputed += 1
                    outcome.amount_disputed += s.claimed_amount or ZERO
                if s.note is not None:
                    if noted is None:
                        noted = deltas()
                    ident = (p.line.reconciliation_key, p.document.contract_version)
                    rows.append(outcome_row(chunk, p, s.outcome, noted[ident], s.note))
            else:
                outcome.duplicate += 1
                ident = (p.line.reconciliation_key, p.document.contract_version)
                if ident in late:
                    rows.append(outcome_row(chunk, p, "duplicate", None, NEWER_VERSION_SETTLED))
                    continue
                row = outcome_row(chunk, p, "duplicate", None)
                kept = claims.get(ident) if claims else None
                # Compared as amounts: 1.0 sent again is the ledger's 1.00.
                if kept is not None and s.claimed_amount is not None and kept != s.claimed_amount:
                    outcome.claim_differs += 1
                    row["reason"] = CLAIMED_AMOUNT_DIFFERS
                    row["ledger_claimed_amount"] = kept
                rows.append(row)
    return rows


Letter = tuple[dict[str, Any], list[dict[str, Any]]]  # a dead letter, its lines' outcome rows


def dead_letter_rows(
    chunk: ChunkRef,
    plan: ChunkPlan,
    attempts: int,
    now: dt.datetime,
    outcome: ChunkOutcome,
) -> list[Letter]:
    """The plan's dead letters, each with its lines' outcome rows (counted in
    ``outcome``); nothing written (``insert_dead_letters`` writes them)."""
    letters: list[Letter] = []
    for p in plan.lines:
        if p.settlement is None:
            letters.append(
                (
                    line_dead_letter(chunk, p, attempts, now),
                    [outcome_row(chunk, p, "dead_lettered", None)],
                )
            )
    for f in plan.failed_documents:
        if f.document is None:
            lines = []
        else:
            doc, first = f.document, f.position
            lines = [
                outcome_row(
                    chunk,
                    PlannedLine(doc, line, None, f.reason, "", -1, _at(first, n)),
                    "dead_lettered",
                    None,
                )
                for n, line in enumerate(f.lines)
            ]
        letters.append((document_dead_letter(chunk, f, attempts, now), lines))
    outcome.dead_lettered += sum(letter["lines"] for letter, _ in letters)
    return letters


def insert_dead_letters(conn: Connection, letters: list[Letter]) -> list[dict[str, Any]]:
    """Insert ``dead_letter_rows``'s letters; return their lines' outcome rows, linked to them."""
    if not letters:
        return []
    ids: Iterable[Any] = conn.execute(
        dead_letters.insert().returning(dead_letters.c.id, sort_by_parameter_order=True),
        [letter for letter, _ in letters],
    ).scalars()
    rows = []
    for letter_id, (_, line_rows) in zip(ids, letters, strict=True):
        for row in line_rows:
            row["dead_letter_id"] = letter_id
            rows.append(row)
    return rows


def _at(first: int | None, n: int) -> int | None:
    """The batch position of a failed document's ``n``-th listed line."""
    return None if first is None else first + n
