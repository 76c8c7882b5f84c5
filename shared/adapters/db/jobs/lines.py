"""Per-line outcomes of a job, paged in batch order (docs/api.md#jobs).

A posted or disputed line's outcome is its ledger row (``ledger_entries``
keeps the job id; the job's ``resolved`` rows, resolutions of its disputes,
are not lines); ``line_outcomes`` holds the rest: duplicates, dead-lettered
lines, and the note (e.g. ``document_type_corrected``) of a posted or disputed
line that has one.

A page lists the job's lines by (position, source, id): ``position`` is the
line's place in the batch (shared/domain/pipeline/units.py::chunk_start), so the lines
come in the order the batch had them whichever chunk settled first; rows
written before positions were (null) come after the positioned ones, by
source and id. Each outcome is read in order from the cursor (positioned rows,
then the null ones): the posted ones through the job's id ranges
(ledger/read/ranges.py), each unit's a range sorted on its own; the disputed ones
from their partial index ``ix_ledger_entries_job_disputes``; the others from
``line_outcomes``'s ``(job_id, outcome, position, id)`` index. A page merges
the outcomes asked for, so neither an outcome filter nor a large job ever
sorts the job's rows. A cursor is the last line's (position, source, id).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from operator import attrgetter
from typing import Any, Literal

from sqlalchemy import ColumnElement, Connection, Engine, Select, and_, select, true, tuple_

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.ledger import job_ranges
from shared.adapters.db.tables import ledger_entries, line_outcomes

Source = Literal["ledger", "other"]
SOURCES: tuple[Source, ...] = ("ledger", "other")  # their order among lines of one position
After = tuple[int | None, Source, int]  # the last line shown: (position, source, id)
# Each outcome a line can have, and the table (source) that holds it.
STREAMS: dict[str, Source] = {
    "posted": "ledger",
    "disputed": "ledger",
    "duplicate": "other",
    "dead_lettered": "other",
}


@dataclass(frozen=True)
class LineRow:
    source: Source
    id: int
    position: int | None
    document_id: str
    line_ref: str
    outcome: str
    amount: Decimal | None
    claimed_amount: Decimal | None
    delta: Decimal | None
    reconciliation_key: str | None
    contract_version: int
    correlation_id: str | None  # the document's (an X12 set's control numbers)
    reason: str | None
    # A duplicate ``claimed_amount_differs``: its ledger row's claim.
    ledger_claimed_amount: Decimal | None = None

    @property
    def cursor(self) -> After:
        return self.position, self.source, self.id


def _order(row: LineRow) -> tuple[bool, int, int, int]:
    position = row.position
    return position is None, position or 0, SOURCES.index(row.source), row.id


def _line(
    source: Source, r: Any, reason: str | None, ledger_claimed_amount: Decimal | None = None
) -> LineRow:
    """A row of ``_COLUMNS`` as a line, by position: an export makes one per
    line, and a lookup of each column by name costs more than the rest of it."""
    # mypy cannot count a row's columns: _COLUMNS are the fields after source.
    return LineRow(source, *r[:11], reason, ledger_claimed_amount)  # type: ignore[call-arg]


# What a line shows of its row (the ledger's other columns, its time above all,
# would only cost their decoding).
_COLUMNS = (
    "id",
    "position",
    "document_id",
    "line_ref",
    "outcome",
    "amount",
    "claimed_amount",
    "delta",
    "reconciliation_key",
    "contract_version",
    "correlation_id",
)


def _select(job_id: str, outcome: str) -> tuple[Source, Any, Select[Any]]:
    """One outcome's rows of the job: its source, that table's columns, the query."""
    source = STREAMS[outcome]
    table = ledger_entries if source == "ledger" else line_outcomes
    wanted = _COLUMNS + (("reason", "ledger_claimed_amount") if source == "other" else ())
    query = select(*(table.c[name] for name in wanted)).where(
        table.c.job_id == job_id, outcome_in(table.c.outcome, outcome)
    )
    return source, table.c, query


def _notes(
    conn: Connection, job_id: str, outcome: str, rows: list[Any]
) -> dict[tuple[int | None, str, int], str | None]:
    """The notes of a page's posted or disputed rows, by (position, key, version):
    a noted line's outcome row has its ledger row's position, so they are one
    range of the job's notes, from the page's first position to its last (notes
    are rare: the range holds few rows, where a list of the page's positions
    would cost a thousand parameters); by key among rows from before positions."""
    c = line_outcomes.c
    placed = [r.position for r in rows if r.position is not None]
    unplaced = sorted({r.reconciliation_key for r in rows if r.position is None})
    wanted: list[ColumnElement[bool]] = []
    if placed:
        wanted.append(c.position.between(min(placed), max(placed)))
    if unplaced:
        wanted.append(and_(c.position.is_(None), c.reconciliation_key.in_(unplaced)))
    notes = {}
    for condition in wanted:
        query = select(c.position, c.reconciliation_key, c.contract_version, c.reason).where(
            c.job_id == job_id, outcome_in(c.outcome, outcome), condition
        )
        for n in conn.execute(query):
            notes[(n.position, n.reconciliation_key, n.contract_version)] = n.reason
    return notes


def _rank(source: Source) -> int:
    return SOURCES.index(source)


def _positioned_after(c: Any, source: Source, after: After | None) -> ColumnElement[bool]:
    """After the cursor among the positioned rows of ``source`` (c: its columns)."""
    condition: ColumnElement[bool]
    if after is None:
        condition = c.position.is_not(None)
        return condition
    position, after_source, after_id = after
    if source == after_source:
        condition = tuple_(c.position, c.id) > tuple_(position, after_id)
    elif _rank(source) > _rank(after_source):
        # At the cursor's own position, a later source's rows are still to come.
        condition = c.position >= position
    else:
        condition = c.position > position
    return condition


def _unpositioned_after(c: Any, source: Source, after: After | None) -> ColumnElement[bool] | None:
    """After the cursor among the null positions; None when none of ``source`` is."""
    condition: ColumnElement[bool] = true()
    if after is not None and after[0] is None:
        if source == after[1]:
            condition = c.id > after[2]
        elif _rank(source) < _rank(after[1]):
            return None
    return condition


def _ranged(conn: Connection, job_id: str, after: After | None, limit: int) -> list[Any]:
    """Up to ``limit`` posted rows of the job after the cursor, in order, read
    through the job's id ranges (ledger/read/ranges.py): positioned rows by
    (position, id), then the unpositioned ones by id."""
    _, c, query = _select(job_id, "posted")
    spans = job_ranges(conn, job_id)
    kept: list[Any] = []
    if after is None or after[0] is not None:
        low = None if after is None else after[0]
        placed = [
            (r.first_position, r)
            for r in spans
            if r.last_position is not None and (low is None or r.last_position >= low)
        ]
        positioned = query.where(_positioned_after(c, "ledger", after))
        kept = _through(conn, positioned, c, placed, ("position", "id"), limit)
    unpositioned = _unpositioned_after(c, "ledger", after)
    if len(kept) < limit and unpositioned is not None:
        rest = query.where(c.position.is_(None), unpositioned)
        unplaced = [(r.first_id, r) for r in spans if r.unpositioned]
        kept += _through(conn, rest, c, unplaced, ("id",), limit - len(kept))
    return kept


def _through(
    conn: Connection,
    query: Select[Any],
    c: Any,
    spans: list[tuple[int, Any]],
    order: tuple[str, ...],
    limit: int,
) -> list[Any]:
    """Up to ``limit`` rows of ``query`` (``c``: its table's columns) by the
    columns ``order``, read a range at a time in the order of each range's
    least first column (``spans``: that value and the range), until no range
    left can hold a row before the ``limit``-th found. Ranges may overlap: a
    row is kept once."""
    found: dict[int, Any] = {}
    kept: list[Any] = []
    key, first = attrgetter(*order), attrgetter(order[0])
    for start, r in sorted(spans, key=lambda s: (s[0], s[1].first_id)):
        if len(kept) == limit and start > first(kept[-1]):
            break
        rows = conn.execute(
            query.where(c.id.between(r.first_id, r.last_id))
            .order_by(*(c[name] for name in order))
            .limit(limit)
        )
        found.update((row.id, row) for row in rows)
        kept = sorted(found.values(), key=key)[:limit]
    return kept


def _stream(
    conn: Connection, job_id: str, outcome: str, after: After | None, limit: int
) -> list[LineRow]:
    """Up to ``limit`` lines of one outcome after the cursor, in order."""
    source, c, query = _select(job_id, outcome)
    found: list[Any] = []
    if outcome == "posted":
        found = _ranged(conn, job_id, after, limit)
    elif after is None or after[0] is not None:
        positioned = query.where(_positioned_after(c, source, after))
        found += conn.execute(positioned.order_by(c.position, c.id).limit(limit)).all()
    unpositioned = _unpositioned_after(c, source, after)
    if outcome != "posted" and len(found) < limit and unpositioned is not None:
        rest = query.where(c.position.is_(None), unpositioned)
        # By id, spelled as the index's order: ``position IS NULL`` is no equality
        # to PostgreSQL's planner, and ``ORDER BY id`` alone would sort the range.
        found += conn.execute(rest.order_by(c.position, c.id).limit(limit - len(found))).all()
    if source == "other":
        # Its reason and the ledger's claim, after _COLUMNS.
        return [_line(source, r, r[11], r[12]) for r in found]
    notes = _notes(conn, job_id, outcome, found) if found else {}
    if not notes:
        return [_line(source, r, None) for r in found]
    return [_line(source, r, notes.get((r[1], r[8], r[9]))) for r in found]


def list_lines(
    engine: Engine,
    job_id: str,
    *,
    outcome: str | None,
    after: After | None,
    limit: int,
) -> list[LineRow]:
    """Up to ``limit`` lines of a job after the cursor ``(position, source, id)``,
    in batch order."""
    rows: list[LineRow] = []
    with engine.connect() as conn:
        for name in STREAMS if outcome is None else (outcome,):
            rows += _stream(conn, job_id, name, after, limit)
    rows.sort(key=_order)
    return rows[:limit]


def stream_lines(
    engine: Engine, job_id: str, *, outcome: str | None, batch: int = 1000
) -> Iterator[LineRow]:
    """Every line of a job (or of one outcome) in batch order, for an export.

    Each outcome is paged on its own, ``batch`` rows a short transaction (on
    SQLite a long one would hold the write lock from settlement), and the pages
    are merged: every row is read once, where a ``list_lines`` page reads up to
    ``limit`` rows of each outcome to keep ``limit`` of them."""

    def pages(name: str) -> Iterator[LineRow]:
        after: After | None = None
        while True:
            with engine.connect() as conn:
                rows = _stream(conn, job_id, name, after, batch)
            yield from rows
            if len(rows) < batch:
                return
            after = rows[-1].cursor

    names = STREAMS if outcome is None else (outcome,)
    return heapq.merge(*(pages(name) for name in names), key=_order)
