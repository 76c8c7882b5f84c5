"""A preview: units settled by the ledger writer's own rules, writing nothing
(docs/architecture.md#previews).

``PreviewWriter`` is a ``LedgerWriter`` whose ``insert`` takes a row without
writing it: a row is taken when its identity is neither in the ledger nor
taken by an earlier unit of the same preview, as the identity's unique index
would decide. Everything else is ``LedgerWriter.settle``: the rounds, the
deltas and what each supersedes, late versions, out-of-range changes,
duplicates and their claims, the dead letters. Its units follow one another
as if each had committed: a later unit's lines find an earlier one's rows as
their lineage's newest (``write_rounds``'s ``carried``) and its identities as
duplicates.

It takes no lock and writes nothing, so it never gets a transaction id: a
settlement never waits on it, nor does the ledger feed's horizon.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.ledger import priors
from shared.adapters.db.ledger.rounds import Carried, Identity, Written, new_flags, write_rounds
from shared.adapters.db.ledger.writer import LedgerWriter, Settled
from shared.adapters.db.periods import booking
from shared.adapters.db.tables import IDENTITY_OUTCOMES, ledger_entries
from shared.adapters.db.types import identity_key, identity_keys
from shared.domain.kinds.base import DeltaBasis
from shared.domain.pipeline.settlement import PlannedLine
from shared.domain.pipeline.units import ChunkRef, Unit
from shared.domain.previews import PreviewLine

# A duplicate's reason when its line outcome has none: which identity it met.
ALREADY_SETTLED = "already_settled"  # in the ledger
REPEATED = "repeated_in_batch"  # earlier in what is previewed

_PROBE = 5000  # identities per existence query


# One snapshot for a whole preview, and no write possible: on PostgreSQL a
# read-only repeatable-read transaction (which never gets a transaction id);
# on SQLite every transaction takes the one write lock, so nothing changes
# under it either.
_READ_ONLY: dict[str, dict[str, Any]] = {
    "postgresql": {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}
}


def read_only(conn: Connection) -> Connection:
    """``conn`` for a preview: one snapshot, read only."""
    return conn.execution_options(**_READ_ONLY.get(conn.dialect.name, {}))


class PreviewWriter(LedgerWriter):
    """Settles units as ``commit`` would, one after another, writing nothing.

    ``unpublished``: (partition, version) pairs no contract has yet (a contract
    preview's): the ledger holds no row of theirs, so none is looked for.
    ``held`` keeps what the ledger held for each lineage the rounds read, before
    any row this preview took: what a line has now (a contract preview's)."""

    def __init__(self, unpublished: frozenset[tuple[str, int]] = frozenset()) -> None:
        self._ids = itertools.count(1)
        self._carried: dict[priors.Lineage, Carried] = {}
        self._taken: dict[Identity, Decimal | None] = {}  # by earlier units: their claims
        self._in_ledger: set[Identity] = set()
        self._unpublished = unpublished
        self.asked: set[priors.Lineage] = set()
        self.held: dict[priors.Lineage, priors.Newest] = {}

    def preview(self, conn: Connection, unit: Unit) -> list[PreviewLine]:
        """The unit's lines as settling it now would leave them (``commit``
        without its locks, its marker and its writes)."""
        chunk = unit.ref
        settled = [p for p in unit.plan.lines if p.settlement is not None]
        repriced = priors.unit_repriced_partitions(conn, chunk.kind, settled, lock=False)
        period = booking.open_period(conn) if settled else ""
        done = self.settle(conn, unit, settled, dt.datetime.now(dt.UTC), period, repriced)
        return list(self._lines(done))

    def write(
        self,
        conn: Connection,
        chunk: ChunkRef,
        settled: list[PlannedLine],
        now: dt.datetime,
        period: str,
        repriced: set[str],
    ) -> tuple[Written, list[bool]]:
        earlier = {
            ident: self._taken[ident]
            for p in settled
            if (ident := (p.line.reconciliation_key, p.document.contract_version)) in self._taken
        }
        written = write_rounds(
            conn,
            chunk,
            settled,
            now,
            period,
            repriced,
            self.insert,
            self._carried,
            self.latest_rows,
        )
        # A duplicate of an identity an earlier unit took is judged by its claim,
        # as duplicate_claims would find it in the ledger.
        written.claims.update(earlier)
        for r in written.rows:
            self._taken[(r.reconciliation_key, r.contract_version)] = r.claimed_amount
        return written, new_flags(settled, written.taken())

    def latest_rows(
        self, conn: Connection, kind: str, basis: DeltaBasis, lines: Sequence[PlannedLine]
    ) -> dict[priors.Lineage, priors.Newest]:
        """``priors.latest_rows``, kept: every read is the ledger's (no row this
        preview took is in it), so the first one of a lineage is what it holds."""
        found = priors.latest_rows(conn, kind, basis, lines)
        for lineage in {priors.lineage(basis, p) for p in lines} - self.asked:
            self.asked.add(lineage)
            if (row := found.get(lineage)) is not None:
                self.held[lineage] = row
        return found

    def insert(self, conn: Connection, rows: list[dict[str, Any]]) -> dict[Identity, int]:
        """Take, without writing, the rows whose identity is free."""
        wanted = [
            (r["reconciliation_key"], r["contract_version"])
            for r in rows
            if (r["reconciliation_key"], r["contract_version"]) not in self._taken
        ]
        probed = [
            (r["reconciliation_key"], r["contract_version"])
            for r in rows
            if (r["partition_key"], r["contract_version"]) not in self._unpublished
        ]
        found = _in_ledger(conn, probed) if probed else set()
        self._in_ledger |= found
        return {ident: next(self._ids) for ident in wanted if ident not in found}

    def _lines(self, done: Settled) -> Iterator[PreviewLine]:
        rows = {(r.reconciliation_key, r.contract_version): r for r in done.written.rows}
        others = iter(done.rows)  # in settled order: duplicates, and new lines with a note
        for p, new in zip(done.settled, done.flags, strict=True):
            s = p.settlement
            assert s is not None
            ident = (p.line.reconciliation_key, p.document.contract_version)
            if new:
                row = rows[ident]
                note = next(others)["reason"] if s.note is not None else None
                yield _line(p, row.outcome, note, s.amount, row.delta)
                continue
            reason = next(others)["reason"] or (
                ALREADY_SETTLED if ident in self._in_ledger else REPEATED
            )
            yield _line(p, "duplicate", reason, s.amount, None)
        for letter, line_rows in done.letters:
            # A document or chunk that could not be read has no lines: its letter.
            for o in line_rows or [letter]:
                yield PreviewLine(
                    letter["partition_key"],
                    o["document_id"],
                    o["line_ref"],
                    o["position"],
                    o["contract_version"],
                    "dead_lettered",
                    o["reason"],
                    None,
                    o.get("claimed_amount"),
                    None,
                    1 if line_rows else letter["lines"],
                )


def _line(
    p: PlannedLine,
    outcome: str,
    reason: str | None,
    amount: Decimal,
    delta: Decimal | None,
) -> PreviewLine:
    s = p.settlement
    assert s is not None
    return PreviewLine(
        p.document.partition_key,
        p.document.document_id,
        p.line.line_ref,
        p.position,
        p.document.contract_version,
        outcome,
        reason,
        amount,
        s.claimed_amount,
        delta,
    )


def _in_ledger(conn: Connection, wanted: Sequence[Identity]) -> set[Identity]:
    """Of these identities, those the ledger holds (the identity's unique index:
    a posted or disputed row of that key and version)."""
    found: set[Identity] = set()
    wanted_set = set(wanted)
    le = ledger_entries.c
    keys = sorted({key for key, _ in wanted})
    for start in range(0, len(keys), _PROBE):
        batch = identity_keys(keys[start : start + _PROBE], conn.dialect.name)
        query = select(le.reconciliation_key, le.contract_version).where(
            identity_key(le.reconciliation_key).in_(batch),
            outcome_in(le.outcome, *IDENTITY_OUTCOMES),
        )
        found.update(i for r in conn.execute(query) if (i := (r[0], r[1])) in wanted_set)
    return found
