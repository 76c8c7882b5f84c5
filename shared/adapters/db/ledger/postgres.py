"""The PostgreSQL ledger writer (docs/architecture.md#the-settlement-transaction).

The rules are the portable ones (rounds.py); PostgreSQL changes how rows go in:

- *The fast case*: where no line can have an earlier row (every document at
  contract version 1, in a partition never re-priced: ``priors.may_have_prior``),
  a new line's delta is its amount, with no row superseded, and the unit's new
  lines are ``COPY``'d straight into the ledger under a savepoint, which costs
  the server less a line than ``INSERT ... SELECT ... ON CONFLICT``, having no
  stage to fill and read back (docs/performance.md). ``COPY`` has no ``ON
  CONFLICT``, so the lines already in the ledger are found first: one probe of
  the identity's index for each document's first line, then one for every line
  of a document found there (a resent document). The identity's unique index
  still judges: a line the probes missed makes the ``COPY`` fail with a unique
  violation, its savepoint is rolled back, and the unit takes the rounds, which
  find it. Exactly-once never rests on the probes.
- *Elsewhere*, each round's rows are ``COPY``'d into a temporary stage and
  inserted from it in one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING
  RETURNING``: one round trip a round, not one a row.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
from sqlalchemy import Connection

from shared.adapters.db.bulk import copy_rows, copy_text, field
from shared.adapters.db.ledger import priors
from shared.adapters.db.ledger.rounds import Identity
from shared.adapters.db.tables import ledger_entries
from shared.adapters.db.types import identity_key_sql
from shared.domain.kinds import KINDS
from shared.domain.pipeline.settlement import PlannedLine
from shared.domain.pipeline.units import LedgerRow

# Every column of the ledger, in the table's order, which _ledger_text follows,
# but ``created_at``: its default is the transaction's ``now()``, the unit's own
# time (writer.py::claim_marker), and the server would parse a timestamp's text
# on every row; and
# ``effective_at``, a recipe row's (these are promo and freight rows: null).
_DEFAULTED = ("created_at", "effective_at")
_COLUMNS = tuple(c.name for c in ledger_entries.columns if c.name not in _DEFAULTED)
# What a round stages: every column but the two the ledger fills (id, created_at).
_STAGED = tuple(c.name for c in ledger_entries.columns if c.name not in ("id", "created_at"))

# Which of these keys have a posted or disputed row at version 1, and its claim
# (a duplicate whose claim changed says so)? LATERAL ... LIMIT 1 keeps it one
# probe of the identity's partial unique index a key (as a semi-join the planner
# may hash the whole ledger instead); only a key found reads its row. The index
# holds each key's bytes (types.identity_key): the probe names the same expression.
_PROBE = f"""
SELECT k.key, e.claimed_amount FROM unnest(CAST(%s AS text[])) AS k(key)
CROSS JOIN LATERAL (
    SELECT l.claimed_amount FROM ledger_entries l
    WHERE {identity_key_sql("l.reconciliation_key")} = {identity_key_sql("k.key")}
      AND l.contract_version = 1
      AND l.outcome IN ('posted', 'disputed')
    LIMIT 1
) e
"""
# The new rows' ids, drawn before the COPY, ascending with the rows' keys. The
# sequence is named as PostgreSQL names a BIGSERIAL's: a constant, resolved once
# (pg_get_serial_sequence here would be looked up again for every row). One
# text: no row per id to fetch.
_IDS = """
SELECT array_to_string(
    ARRAY(SELECT nextval('ledger_entries_id_seq') FROM generate_series(1, %s)), ','
)
"""
_SAVEPOINT = "settle_by_copy"

# A round's stage: the ledger's own column types (one place for them), emptied
# at every commit and rollback, so it only ever holds this round's rows. No JIT
# for the transaction: once the ledger is large an insert's estimated cost
# passes jit_above_cost, and compiling costs more than running the plan of
# index probes it compiles.
_STAGE = f"""
CREATE TEMP TABLE IF NOT EXISTS ledger_stage ON COMMIT DELETE ROWS AS
SELECT {", ".join(_STAGED)} FROM ledger_entries WITH NO DATA;
DELETE FROM ledger_stage;
SET LOCAL jit = off
"""
_INSERT_STAGED = f"""
INSERT INTO ledger_entries ({", ".join(_STAGED)})
SELECT {", ".join(_STAGED)} FROM ledger_stage ORDER BY reconciliation_key, contract_version
ON CONFLICT ({identity_key_sql("reconciliation_key")}, contract_version)
WHERE outcome IN ('posted', 'disputed')
DO NOTHING
RETURNING id, reconciliation_key, contract_version
"""


def can_copy(kind: str, settled: list[PlannedLine], repriced: set[str]) -> bool:
    """The fast case: can no line of this unit have an earlier ledger row
    (``priors.may_have_prior``), and is every line's batch position known?"""
    basis = KINDS[kind].delta_basis
    if not settled or basis != "key_versions":
        return False
    doc = None
    for p in settled:
        if p.position is None:
            return False
        if p.document is not doc:
            doc = p.document
            if priors.may_have_prior(basis, p, repriced):
                return False
    return True


def insert_staged(conn: Connection, rows: list[dict[str, Any]]) -> dict[Identity, int]:
    """``rounds.InsertRows`` on PostgreSQL: a round's rows staged by COPY, then
    inserted in one statement."""
    cursor = _cursor(conn)
    try:
        cursor.execute(_STAGE)
        copy_rows(conn, "ledger_stage", _STAGED, rows)
        cursor.execute(_INSERT_STAGED)
        return {(key, version): row_id for row_id, key, version in cursor.fetchall()}
    finally:
        cursor.close()


def settle_by_copy(
    conn: Connection, kind: str, job_id: str, settled: list[PlannedLine], period: str
) -> tuple[list[bool], list[LedgerRow], dict[str, Decimal | None]] | None:
    """COPY a ``can_copy`` unit's new lines into the ledger. Returns whether
    each line was new (not a repeat within the unit, not in the ledger), the
    rows written, in id order, and the claims of the ledger's rows of the lines
    already there, by key; or None, with nothing written, when the COPY met a
    line already in the ledger."""
    cursor = _cursor(conn)
    try:
        known = _known_keys(cursor, settled)
        flags: list[bool] = []
        seen: set[str] = set()
        for p in settled:
            key = p.line.reconciliation_key
            flags.append(key not in seen and key not in known)
            seen.add(key)
        new = len(seen - known.keys())
        if not new:
            return flags, [], known
        cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
        row = cursor.execute(_IDS, (new,)).fetchone()
        assert row is not None
        ids = [int(i) for i in row[0].split(",")]
        text, written = _ledger_text(kind, job_id, settled, flags, ids, period)
        try:
            copy_text(conn, "ledger_entries", _COLUMNS, text)
        except psycopg.errors.UniqueViolation:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            return None
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    finally:
        cursor.close()
    return flags, written, known


def _cursor(conn: Connection) -> Any:
    raw = conn.connection.dbapi_connection
    assert raw is not None
    return raw.cursor()


def _known_keys(cursor: Any, settled: list[PlannedLine]) -> dict[str, Decimal | None]:
    """The unit's keys already in the ledger, with their rows' claims, as far as
    two probes find them: each document's first key, then every key of the
    documents found (a resent document). A document found by neither probe is
    taken to be new: if one of its later lines is in the ledger after all, the
    COPY meets it."""
    firsts: list[str] = []
    doc = None
    for p in settled:
        if p.document is not doc:
            doc = p.document
            firsts.append(p.line.reconciliation_key)
    found = {row[0] for row in cursor.execute(_PROBE, (firsts,))}
    if not found:
        return {}
    resent: list[str] = []
    take = False
    doc = None
    for p in settled:
        if p.document is not doc:
            doc = p.document
            take = p.line.reconciliation_key in found
        if take:
            resent.append(p.line.reconciliation_key)
    return {row[0]: row[1] for row in cursor.execute(_PROBE, (resent,))}


def _ledger_text(
    kind: str,
    job_id: str,
    settled: list[PlannedLine],
    flags: list[bool],
    ids: list[int],
    period: str,
) -> tuple[str, list[LedgerRow]]:
    """The new lines as COPY rows of ``_COLUMNS``, and as the rows written, in id
    order: delta is the amount, no row is superseded. Ids ascend in batch order,
    so a document's rows are one range of them (ranges.py); the rows go in key
    order: consecutive inserts into the identity's index (random keys) then land
    near each other, which costs the server less than inserting them in
    arrival order, and two COPYs racing on shared keys wait on them in one
    order, never on each other in a cycle."""
    # A document's lines are consecutive: its fields are escaped once, not per line.
    head = f"\t1\t{field(kind)}\t"
    tail = f"\t{field(job_id)}\t"
    booked = f"\t{field(period)}\n"
    doc = None
    middle = end = ""
    rows: list[tuple[str, int, PlannedLine]] = []  # each row after its id, starting with its key
    append = rows.append
    next_id = iter(ids).__next__
    for p, new in zip(settled, flags, strict=True):
        if not new:
            continue
        if p.document is not doc:
            doc = p.document
            middle = f"{head}{field(doc.partition_key)}\t{field(doc.document_id)}\t"
            end = f"\t\\N\t{field(doc.correlation_id)}\t"
        s = p.settlement
        assert s is not None
        ref = p.line.line_ref
        if "\\" in ref:
            ref = field(ref)
        claimed = "\\N" if s.claimed_amount is None else str(s.claimed_amount)
        amount = str(s.amount)
        append(
            (
                f"{p.line.reconciliation_key}{middle}{ref}{tail}{s.outcome}\t{amount}"
                f"\t{claimed}\t{amount}{end}{p.position}{booked}",
                next_id(),
                p,
            )
        )
    # tuple.__new__: a NamedTuple's own __new__ is a Python call per row.
    make = tuple.__new__
    written = []
    for _, i, p in rows:
        d, s = p.document, p.settlement
        assert s is not None
        row = (
            i,
            p.line.reconciliation_key,
            1,
            s.outcome,
            kind,
            job_id,
            d.document_id,
            p.line.line_ref,
            d.partition_key,
            d.correlation_id,
            s.amount,
            s.claimed_amount,
            s.amount,
            None,
            period,
        )
        written.append(make(LedgerRow, row))
    rows.sort()  # each starts with its key, a distinct one: the rows sort by key
    text = "".join(f"{i}\t{row}" for row, i, _ in rows)
    return text, written
