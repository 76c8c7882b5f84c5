"""The PostgreSQL fast path of the settlement: the new lines of a chunk that
can have no earlier rows are ``COPY``'d straight into the ledger, under a
savepoint.

The one settle statement (``bulk_settle``) stages a chunk and inserts it with
``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: about 13 µs of server CPU a
line, against about 8 for ``COPY`` into the ledger itself (``bench.stages``, the
ledger's indexes as they are). ``COPY`` has no ``ON CONFLICT``, so the lines
already in the ledger are found first: one probe of the identity's index for
each document's first line, then one for every line of a document found there
(a resent document). The identity's unique index still judges: a line the
probes missed makes the ``COPY`` fail with a unique violation, its savepoint is
rolled back, and the chunk takes the statement, which finds it. Exactly-once
never rests on the probes.

Only where no line can have an earlier row (every document at contract version
1, in a partition never re-priced) is a new line's delta its amount, with no
row superseded; elsewhere the statement computes them.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import psycopg
from sqlalchemy import Connection

from shared.adapters.db.bulk import copy_text, field
from shared.adapters.db.tables import ledger_entries
from shared.domain.kinds import KINDS
from shared.domain.settlement import PlannedLine

Identity = tuple[str, int]  # (reconciliation key, contract version)

# Every column of the ledger, in the table's order, which _ledger_text follows,
# but ``created_at``: its default is the transaction's ``now()``, the unit's own
# time (ledger.py::_claim_marker), and a timestamp's text costs the server ~0.7 µs
# a row to parse (a private tuned cluster, 400,000 rows, alternated A/B); and
# ``effective_at``, a recipe row's (these are promo and freight rows: null).
_DEFAULTED = ("created_at", "effective_at")
_COLUMNS = tuple(c.name for c in ledger_entries.columns if c.name not in _DEFAULTED)

# Which of these keys have a posted or disputed row at version 1? LATERAL ...
# LIMIT 1 keeps it one probe of the identity's partial unique index a key (as a
# semi-join the planner may hash the whole ledger instead).
_PROBE = """
SELECT k.key FROM unnest(CAST(%s AS text[])) AS k(key)
CROSS JOIN LATERAL (
    SELECT 1 FROM ledger_entries l
    WHERE l.reconciliation_key = k.key COLLATE "C" AND l.contract_version = 1
      AND l.outcome IN ('posted', 'disputed')
    LIMIT 1
) e
"""
# The new rows' ids, drawn before the COPY so the outbox row can list them. The
# sequence is named as PostgreSQL names a BIGSERIAL's: a constant, resolved once
# (pg_get_serial_sequence here would be looked up again for every row).
# One text, ascending (each nextval of a session exceeds its last), as the
# outbox row lists them: no row per id to fetch, and no sort (string_agg's
# ORDER BY cost ~0.4 µs of the server's CPU an id, nextval itself ~0.5).
_IDS = """
SELECT array_to_string(
    ARRAY(SELECT nextval('ledger_entries_id_seq') FROM generate_series(1, %s)), ','
)
"""
_SAVEPOINT = "settle_by_copy"


def can_copy(conn: Connection, kind: str, settled: list[PlannedLine], repriced: set[str]) -> bool:
    """Can no line of this chunk have an earlier ledger row? (PostgreSQL, a kind
    whose delta is measured against the key's earlier versions, every document
    at version 1 in a partition never re-priced, every line's batch position known.)"""
    if not settled or repriced or conn.dialect.name != "postgresql":
        return False
    if KINDS[kind].delta_basis != "key_versions":
        return False
    doc = None
    for p in settled:
        if p.position is None:
            return False
        if p.document is not doc:
            doc = p.document
            if doc.contract_version != 1:
                return False
    return True


def settle_by_copy(
    conn: Connection,
    kind: str,
    job_id: str,
    settled: list[PlannedLine],
    now: dt.datetime,
) -> tuple[list[bool], dict[Identity, Decimal]] | None:
    """COPY a ``can_copy`` chunk's new lines into the ledger, with their outbox
    row. Returns whether each line was new (not a repeat within the chunk, not
    in the ledger) and the deltas of the noted new lines (their outcome rows are
    the caller's), or None, with nothing written, when the COPY met a line
    already in the ledger."""
    raw = conn.connection.dbapi_connection
    assert raw is not None
    cursor = raw.cursor()
    try:
        known = _known_keys(cursor, settled)
        flags: list[bool] = []
        seen: set[str] = set()
        for p in settled:
            key = p.line.reconciliation_key
            flags.append(key not in seen and key not in known)
            seen.add(key)
        new = len(seen - known)
        if not new:
            return flags, {}
        cursor.execute(f"SAVEPOINT {_SAVEPOINT}")
        row = cursor.execute(_IDS, (new,)).fetchone()
        assert row is not None
        ids: str = row[0]
        try:
            text = _ledger_text(kind, job_id, settled, flags, ids)
            copy_text(conn, "ledger_entries", _COLUMNS, text)
        except psycopg.errors.UniqueViolation:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            return None
        cursor.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        cursor.execute(
            "INSERT INTO outbox (ledger_entry_ids, created_at) VALUES (%s, %s)", (ids, now)
        )
    finally:
        cursor.close()
    deltas = {
        (p.line.reconciliation_key, 1): p.settlement.amount
        for p, is_new in zip(settled, flags, strict=True)
        if is_new and p.settlement is not None and p.settlement.note is not None
    }
    return flags, deltas


def _known_keys(cursor: Any, settled: list[PlannedLine]) -> set[str]:
    """The chunk's keys already in the ledger, as far as two probes find them:
    each document's first key, then every key of the documents found (a resent
    document). A document found by neither probe is taken to be new: if one of
    its later lines is in the ledger after all, the COPY meets it."""
    firsts: list[str] = []
    doc = None
    for p in settled:
        if p.document is not doc:
            doc = p.document
            firsts.append(p.line.reconciliation_key)
    found = {row[0] for row in cursor.execute(_PROBE, (firsts,))}
    if not found:
        return found
    resent: list[str] = []
    take = False
    doc = None
    for p in settled:
        if p.document is not doc:
            doc = p.document
            take = p.line.reconciliation_key in found
        if take:
            resent.append(p.line.reconciliation_key)
    return {row[0] for row in cursor.execute(_PROBE, (resent,))}


def _ledger_text(
    kind: str,
    job_id: str,
    settled: list[PlannedLine],
    flags: list[bool],
    ids: str,
) -> str:
    """The new lines as COPY rows of ``_COLUMNS``: delta is the amount, no row is
    superseded. In key order, ids ascending with it: consecutive inserts into
    the identity's index (random keys) then land near each other (about 5%
    less PostgreSQL CPU a line measured on a ledger of 0.5 to 1.5 million rows),
    and two COPYs racing on shared keys wait on them in one order, never on
    each other in a cycle."""
    # A document's lines are consecutive: its fields are escaped once, not per line.
    head = f"\t1\t{field(kind)}\t"
    tail = f"\t{field(job_id)}\t"
    doc = None
    middle = end = ""
    rows: list[str] = []  # each row after its id, which starts with its key
    append = rows.append
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
            f"{p.line.reconciliation_key}{middle}{ref}{tail}{s.outcome}\t{amount}"
            f"\t{claimed}\t{amount}{end}{p.position}\n"
        )
    rows.sort()  # each starts with its key, a distinct one: the rows sort by key
    return "".join(f"{i}\t{row}" for i, row in zip(ids.split(","), rows, strict=True))
