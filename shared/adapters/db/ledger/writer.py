"""The settlement transaction: one unit of work, one database transaction
(docs/architecture.md#the-settlement-transaction).

In order: the lineage locks, the unit's processed marker (a redelivered unit
stops here), the ledger rows (``rounds.py``'s rules; how they go in is the
backend's: ``LedgerWriter.insert`` and, on PostgreSQL, the ``COPY`` of the
fast case), dead letters, per-line outcomes, the unit's counter increments,
its outbox row, and for a job's last chunk the job's webhook events
(webhooks/events.py). A unit is a chunk, or a requeued dead letter whose lines
move from ``dead_lettered`` to their new outcome.

A dispute's resolution is booked here too (``resolve_one``,
``resolve_selected``; its rows' rules in resolutions.py): its ``resolved``
rows and their outbox rows, so the ledger and the outcome feed have one
writer; the dispute queue (disputes/resolve.py) decides and records the rest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Select,
    Text,
    cast,
    delete,
    func,
    insert,
    literal,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY

from shared.adapters.db.bulk import insert_rows
from shared.adapters.db.dialect import insert_ignoring_conflicts, outcome_in
from shared.adapters.db.ledger import postgres, priors, ranges, resolutions
from shared.adapters.db.ledger.outcomes import (
    Letter,
    dead_letter_rows,
    duplicate_claims,
    insert_dead_letters,
    settled_outcomes,
)
from shared.adapters.db.ledger.resolutions import EVENTS_PER_OUTBOX_ROW, Booked, Outboxed
from shared.adapters.db.ledger.rounds import Identity, Written, new_flags, write_rounds
from shared.adapters.db.periods import booking
from shared.adapters.db.tables import (
    IDENTITY_OUTCOMES,
    MATCH_OUTCOMES,
    chunk_results,
    ledger_entries,
    line_outcomes,
    outbox,
)
from shared.adapters.db.types import identity_key
from shared.adapters.db.webhooks import events as webhook_events
from shared.domain.money import ZERO
from shared.domain.pipeline.settlement import ChunkPlan, PlannedLine
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef, LedgerRow, Unit, UnitResult


@dataclass
class Settled:
    """A unit settled by ``LedgerWriter.settle``: its settled lines (those whose
    change fits the ledger) and whether each was new, its ledger rows, its
    counts, the outcome rows its ledger rows do not describe, and its dead
    letters with their lines' outcome rows."""

    settled: list[PlannedLine]
    flags: list[bool]
    written: Written
    outcome: ChunkOutcome
    rows: list[dict[str, Any]]
    letters: list[Letter]


class LedgerWriter:
    """Commits units of work into the ledger: the portable writer (SQLite, and
    the rules every backend shares). ``commit`` runs inside the caller's
    transaction; the caller commits, then publishes the result's events."""

    def commit(self, conn: Connection, unit: Unit) -> UnitResult | None:
        """Record a unit; what it wrote, or None when it was already processed."""
        chunk = unit.ref
        settled = [p for p in unit.plan.lines if p.settlement is not None]
        repriced = priors.unit_repriced_partitions(conn, chunk.kind, settled)
        period = ""
        if settled:
            # First of all: a close waits for this transaction, or it for the
            # close, and its rows are booked in the period open at its commit
            # (periods/booking.py).
            period = booking.book(conn)
            # Before any prior is read: a concurrent unit writing the same lineage
            # commits first, and its rows are then read (READ COMMITTED). And
            # before the unit's first write, which gives the transaction its id:
            # a unit that supersedes another's row then has the larger one, and
            # the ledger feed, in transaction id order, gives it second
            # (docs/architecture.md#the-ledger-feed).
            priors.lock_lineages(
                conn, chunk.kind, priors.lock_groups(chunk.kind, settled, repriced)
            )
        now = claim_marker(conn, chunk)
        if now is None:
            return None
        done = self.settle(conn, unit, settled, now, period, repriced)
        rows = done.rows + insert_dead_letters(conn, done.letters)
        outcome = done.outcome
        if chunk.requeue is not None:
            # The requeued lines leave dead_lettered for the outcome they have now.
            outcome.dead_lettered -= chunk.requeue.lines
            conn.execute(
                delete(line_outcomes).where(
                    line_outcomes.c.dead_letter_id == chunk.requeue.dead_letter_id
                )
            )
        for row in rows:
            row.setdefault("dead_letter_id", None)
        insert_rows(conn, line_outcomes, rows)
        _store_counts(conn, chunk, outcome)
        if chunk.requeue is None:
            webhook_events.after_chunk(conn, chunk.job_id, now)
        written = done.written.rows
        if written:
            placed = [p.position for p in done.settled if p.position is not None]
            span = (min(placed), max(placed)) if placed else None
            ranges.record(conn, written, span, len(done.settled) - len(placed))
        return UnitResult(outcome, now, written, write_outbox(conn, written, now))

    def settle(
        self,
        conn: Connection,
        unit: Unit,
        settled: list[PlannedLine],
        now: dt.datetime,
        period: str,
        repriced: set[str],
    ) -> Settled:
        """What the unit comes to: its ledger rows (written by ``write``), each
        line's outcome, its dead letters (not written yet). A commit and a
        preview (ledger/preview.py) both come here: the one place these rules run."""
        chunk, plan = unit.ref, unit.plan
        outcome = ChunkOutcome()
        written, flags = self.write(conn, chunk, settled, now, period, repriced)
        if written.out_of_range:
            dropped = {id(p) for p in written.out_of_range}
            settled = [p for p in settled if id(p) not in dropped]
            plan = _with_dead_lettered(plan, written.out_of_range)
            flags = new_flags(settled, written.taken())
        claims = duplicate_claims(conn, settled, flags, written)
        rows = settled_outcomes(
            chunk, settled, flags, outcome, lambda: _deltas(written), written.late, claims
        )
        letters = dead_letter_rows(chunk, plan, unit.attempts, now, outcome)
        return Settled(settled, flags, written, outcome, rows, letters)

    def write(
        self,
        conn: Connection,
        chunk: ChunkRef,
        settled: list[PlannedLine],
        now: dt.datetime,
        period: str,
        repriced: set[str],
    ) -> tuple[Written, list[bool]]:
        """The unit's new ledger rows, booked in ``period``, and for each settled
        line whether it was new."""
        written = write_rounds(conn, chunk, settled, now, period, repriced, self.insert)
        return written, new_flags(settled, written.taken())

    def insert(self, conn: Connection, rows: list[dict[str, Any]]) -> dict[Identity, int]:
        """``rounds.InsertRows``: SQLAlchemy's ``INSERT ... ON CONFLICT DO NOTHING
        RETURNING``, judged by the identity's partial unique index (never a
        resolution's)."""
        statement = insert_ignoring_conflicts(
            conn,
            ledger_entries,
            [identity_key(ledger_entries.c.reconciliation_key), ledger_entries.c.contract_version],
            outcome_in(ledger_entries.c.outcome, *IDENTITY_OUTCOMES),
        ).returning(
            ledger_entries.c.id,
            ledger_entries.c.reconciliation_key,
            ledger_entries.c.contract_version,
        )
        return {
            (r.reconciliation_key, r.contract_version): r.id for r in conn.execute(statement, rows)
        }

    def lock_disputes(self, conn: Connection, disputes: Sequence[Any]) -> None:
        """The lineage locks of disputes about to be resolved (their kind,
        partition, document and line), taken before they are read again: a
        settlement of a newer version of one waits for the resolution, or the
        resolution for it. Before them, the booking lock (periods/booking.py):
        the resolution is booked in the period open when it commits."""
        booking.share(conn)
        resolutions.lock(conn, disputes)

    def resolve_one(
        self, conn: Connection, dispute_id: int, amount: Decimal, now: dt.datetime
    ) -> Booked:
        """Book one dispute's decided amount: its ``resolved`` row and outbox
        row, or nothing when another transaction resolved it first."""
        period = booking.open_period(conn)
        return _booked(conn, resolutions.insert_one(conn, dispute_id, amount, now, period), now)

    def resolve_selected(
        self, conn: Connection, which: Select[Any], disputed: Any, decided: Any, now: dt.datetime
    ) -> Booked:
        """Book the disputed rows ``which`` selects (its FROM and WHERE; its
        columns are replaced) at the amount of their column ``decided``
        (``disputed`` is their alias in ``which``), in one statement, whatever
        their number; those resolved meanwhile get nothing."""
        period = booking.open_period(conn)
        rows = resolutions.insert_selected(conn, which, disputed, decided, now, period)
        return _booked(conn, rows, now)

    def book_matches(
        self, conn: Connection, rows: list[dict[str, Any]], now: dt.datetime, period: str
    ) -> Booked:
        """Book a remittance's (or a deduction decision's) ``deducted`` and
        ``written_off`` rows, booked in ``period`` (the caller took the booking
        lock), with their outbox rows. A row whose identity is in the ledger
        already (``uq_ledger_entries_match``) inserts nothing."""
        if not rows:
            return Booked([], [])
        statement = (
            insert_ignoring_conflicts(
                conn,
                ledger_entries,
                [ledger_entries.c.reconciliation_key],
                outcome_in(ledger_entries.c.outcome, *MATCH_OUTCOMES),
            )
        ).returning(*(ledger_entries.c[name] for name in LedgerRow._fields))
        # Many rows as one executemany: compiled once, sent in batches
        # (SQLAlchemy's insertmanyvalues), where one VALUES of thousands of
        # rows would be compiled for its every parameter.
        values = [{**row, "period": period, "created_at": now} for row in rows]
        return _booked(conn, [LedgerRow(*r) for r in conn.execute(statement, values)], now)


class PostgresWriter(LedgerWriter):
    """PostgreSQL: the fast case by ``COPY``, else the rounds with staged inserts
    (``postgres.py``). With ``by_copy=False`` every unit takes the rounds: the
    plain path behind the fast one, which must write the same."""

    def __init__(self, *, by_copy: bool = True) -> None:
        self.by_copy = by_copy

    def write(
        self,
        conn: Connection,
        chunk: ChunkRef,
        settled: list[PlannedLine],
        now: dt.datetime,
        period: str,
        repriced: set[str],
    ) -> tuple[Written, list[bool]]:
        if self.by_copy and postgres.can_copy(chunk.kind, settled, repriced):
            copied = postgres.settle_by_copy(conn, chunk.kind, chunk.job_id, settled, period)
            if copied is not None:
                flags, rows, known = copied
                return Written(rows=rows, claims={(k, 1): c for k, c in known.items()}), flags
        return super().write(conn, chunk, settled, now, period, repriced)

    def insert(self, conn: Connection, rows: list[dict[str, Any]]) -> dict[Identity, int]:
        return postgres.insert_staged(conn, rows)


_WRITERS = {"postgresql": PostgresWriter()}
_PORTABLE = LedgerWriter()


def writer_for(conn: Connection) -> LedgerWriter:
    """The ledger writer of the connection's backend: the one place it is chosen."""
    return _WRITERS.get(conn.dialect.name, _PORTABLE)


def claim_marker(conn: Connection, chunk: ChunkRef) -> dt.datetime | None:
    """Insert the processed marker; its time, which stamps every row of the unit,
    or None when another delivery already did.

    On PostgreSQL the time is the server's, the transaction's own ``now()``:
    the ledger's rows then carry one clock whichever host settled them, and a
    row ``COPY``'d into the ledger takes it as the column's default, with no
    timestamp text to parse a row (postgres.py)."""
    server = conn.dialect.name == "postgresql"
    stamp: Any = func.now() if server else dt.datetime.now(dt.UTC)
    row = conn.execute(
        insert_ignoring_conflicts(conn, chunk_results)
        .values(
            chunk_id=chunk.result_id,
            job_id=chunk.job_id,
            source="chunk" if chunk.requeue is None else "requeue",
            posted=0,
            disputed=0,
            duplicate=0,
            dead_lettered=0,
            amount_posted=ZERO,
            amount_disputed=ZERO,
            created_at=stamp,
        )
        .returning(chunk_results.c.created_at)
    ).first()
    if row is None:
        return None
    # SQLite would give it back without its zone.
    when: dt.datetime = row[0] if server else stamp
    return when


def write_outbox(conn: Connection, rows: list[LedgerRow], now: dt.datetime) -> int | None:
    """The outbox row of a unit's new ledger rows (each one event,
    docs/architecture.md#outcome-events); its id, or None when there are none."""
    if not rows:
        return None
    ids: Any = [r.id for r in rows]
    if conn.dialect.name == "postgresql":
        # The array's text, read by the server: the driver would adapt the
        # list element by element, for thousands of ids a unit.
        ids = cast(literal("{" + ",".join(map(str, ids)) + "}", Text), ARRAY(BigInteger))
    row_id: int = conn.execute(
        insert(outbox).values(ledger_entry_ids=ids, created_at=now).returning(outbox.c.id)
    ).scalar_one()
    return row_id


def _deltas(written: Written) -> dict[Identity, Any]:
    """The deltas of the new rows, by identity (a noted line's outcome row keeps its own)."""
    return {(r.reconciliation_key, r.contract_version): r.delta for r in written.rows}


def _store_counts(conn: Connection, chunk: ChunkRef, outcome: ChunkOutcome) -> None:
    conn.execute(
        update(chunk_results)
        .where(chunk_results.c.chunk_id == chunk.result_id)
        .values(
            posted=outcome.posted,
            disputed=outcome.disputed,
            duplicate=outcome.duplicate,
            dead_lettered=outcome.dead_lettered,
            amount_posted=outcome.amount_posted,
            amount_disputed=outcome.amount_disputed,
            claim_differs=outcome.claim_differs,
        )
    )


def _with_dead_lettered(plan: ChunkPlan, out_of_range: list[PlannedLine]) -> ChunkPlan:
    """The plan's dead letters plus the lines whose delta cannot fit the ledger."""
    message = "the change from the previous amount does not fit the ledger"
    return ChunkPlan(
        lines=[p for p in plan.lines if p.settlement is None]
        + [
            PlannedLine(
                p.document, p.line, None, "amount_out_of_range", message, p.index, p.position
            )
            for p in out_of_range
        ],
        failed_documents=plan.failed_documents,
    )


def _booked(conn: Connection, rows: list[LedgerRow], now: dt.datetime) -> Booked:
    """Resolutions' rows with their outbox rows, at most ``EVENTS_PER_OUTBOX_ROW``
    events each, so a bulk resolution's messages stay small whatever its notes
    (shared/domain/pipeline/events.py)."""
    ordered = sorted(rows, key=lambda r: r.id)
    ranges.record(conn, ordered)
    outbox = []
    for start in range(0, len(ordered), EVENTS_PER_OUTBOX_ROW):
        part = ordered[start : start + EVENTS_PER_OUTBOX_ROW]
        outbox_id = write_outbox(conn, part, now)
        assert outbox_id is not None
        outbox.append(Outboxed(outbox_id, part))
    return Booked(rows, outbox)
