"""The PostgreSQL path of the settlement: a promo or freight chunk's settled
lines (ledger rows, their outbox row, their outcome rows) in one statement
(``settle_lines``), fed by ``COPY`` into a staging table (``bulk.staged``)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from sqlalchemy import Connection

from shared.adapters.db import bulk, bulk_copy, priors
from shared.adapters.db.bulk import STAGE_COLUMNS, STAGE_TABLE, copy_text
from shared.adapters.db.bulk_copy import Identity
from shared.domain.kinds import KINDS
from shared.domain.lineage import NEWER_VERSION_SETTLED
from shared.domain.settlement import LEDGER_LIMIT, PlannedLine
from shared.domain.units import ChunkRef


def settle_in_bulk(
    conn: Connection,
    chunk: ChunkRef,
    settled: list[PlannedLine],
    now: dt.datetime,
    repriced: set[str],
) -> tuple[list[PlannedLine], list[bool], list[PlannedLine], dict[Identity, Decimal] | None] | None:
    """PostgreSQL: ledger rows and outbox events by COPY where no line can have
    an earlier row (bulk_copy), else ledger rows, outbox events and outcome rows
    in one statement. Returns the lines it settled, whether each was new, the
    lines whose delta did not fit the ledger, and the noted lines' deltas when
    their outcome rows are still to write (the COPY path); None where the
    portable path must run instead."""
    if bulk_copy.can_copy(conn, chunk.kind, settled, repriced):
        copied = bulk_copy.settle_by_copy(conn, chunk.kind, chunk.job_id, settled, now)
        if copied is not None:
            flags, deltas = copied
            return settled, flags, [], deltas
    stage = stage_for_bulk(conn, chunk.kind, settled)
    if stage is None:
        return None
    duplicates, too_large = settle_lines(
        conn,
        stage,
        kind=chunk.kind,
        job_id=chunk.job_id,
        chunk_id=chunk.chunk_id,
        now=now,
        limit=LEDGER_LIMIT,
        repriced=repriced,
    )
    if not too_large:
        return settled, [seq not in duplicates for seq in range(len(settled))], [], None
    kept = [p for seq, p in enumerate(settled) if seq not in too_large]
    flags = [seq not in duplicates for seq in range(len(settled)) if seq not in too_large]
    return kept, flags, [settled[seq] for seq in sorted(too_large)], None


def stage_for_bulk(conn: Connection, kind: str, settled: list[PlannedLine]) -> str | None:
    """The COPY text of a chunk the one PostgreSQL statement can settle, else None:
    the portable path (SQLite, line-history kinds, a key under two versions)."""
    if not settled or conn.dialect.name != "postgresql":
        return None
    if KINDS[kind].delta_basis != "key_versions":
        return None
    text, two_versions = bulk.staged(settled)
    return None if two_versions else text


def _latest(line: str) -> str:
    """The latest row of the staged line ``line``'s lineage (same key, kind and
    partition): its latest posted or disputed row (found through the identity's
    partial unique index, whose predicate the probe repeats), or that row's
    resolution when it has one (a resolution only ever follows the latest), with
    the disputed row's version."""
    # The resolution probe runs for a disputed row only (a one-time filter, so a
    # posted prior costs nothing more), by the resolution index's key (LIMIT
    # keeps the planner from flattening it into a scan of that index).
    return f"""
            SELECT COALESCE(r.id, l.id) AS id, COALESCE(r.amount, l.amount) AS amount,
                   l.contract_version
            FROM (
                SELECT l.id, l.amount, l.outcome, l.contract_version FROM ledger_entries l
                WHERE l.reconciliation_key = {line}.reconciliation_key
                  AND l.outcome IN ('posted', 'disputed')
                  AND l.kind = %(kind)s AND l.partition_key = {line}.partition_key
                ORDER BY l.id DESC LIMIT 1
            ) l
            LEFT JOIN LATERAL (
                SELECT r.id, r.amount FROM ledger_entries r
                WHERE l.outcome = 'disputed' AND r.supersedes_id = l.id
                  AND r.outcome = 'resolved'
                LIMIT 1
            ) r ON true
        """


# One statement settles a chunk's lines: the ledger rows (the identity's unique
# index decides what is new; the latest row of the same key in the same kind and
# partition gives delta and supersedes_id: the caller holds the key's lineage
# lock, so that is the row committed just before, and sends a chunk holding a
# key under two versions down the portable path, which chains them), one
# outbox row listing them, and the outcome rows of the lines the ledger does
# not describe: duplicates (an identity that was not new, or a line older than
# its key's newest row: late, ``newer_version_settled``), and posted or
# disputed lines carrying a note. A posted or disputed line's outcome is its ledger
# row (docs/architecture.md#ledger-schema keeps job_id), so the common case writes one row
# per line, not two. A row whose delta would not fit the ledger column is not
# inserted. It returns the stage numbers (seq) of the duplicates (false) and of
# the rows whose delta does not fit (true).
_SETTLE = """
WITH ins AS (
    INSERT INTO ledger_entries (
        reconciliation_key, contract_version, kind, partition_key, document_id, line_ref,
        job_id, outcome, amount, claimed_amount, delta, supersedes_id, correlation_id,
        created_at, position)
    SELECT u.reconciliation_key, u.contract_version, %(kind)s, u.partition_key, u.document_id,
           u.line_ref, %(job_id)s, u.outcome, u.amount, u.claimed_amount,
           u.delta, u.supersedes_id, u.correlation_id, %(now)s, u.position
    FROM (
        -- No earlier row can exist: delta is the amount (which fits: planning checked).
        -- repriced: the chunk's partitions with a contract above version 1
        -- (priors.repriced_partitions); only there can a version-1 line have an
        -- earlier row. Kept apart so these lines pay for no probe, not even its setup.
        SELECT s.*, s.amount AS delta, NULL::bigint AS supersedes_id
        FROM settle_rows s
        WHERE s.first AND s.contract_version = 1
          AND s.partition_key <> ALL(CAST(%(repriced)s AS text[]))
        UNION ALL
        SELECT s.*, s.amount - COALESCE(p.amount, 0), p.id
        FROM settle_rows s
        LEFT JOIN LATERAL ({latest}) p ON true
        WHERE s.first
          AND (s.contract_version > 1 OR s.partition_key = ANY(CAST(%(repriced)s AS text[])))
          AND NOT {older}
          AND abs(s.amount - COALESCE(p.amount, 0)) < %(limit)s
    ) u
    ORDER BY u.reconciliation_key, u.contract_version
    ON CONFLICT (reconciliation_key, contract_version) WHERE outcome IN ('posted', 'disputed')
    DO NOTHING
    RETURNING id, reconciliation_key, contract_version, delta
), events AS (
    INSERT INTO outbox (ledger_entry_ids, created_at)
    SELECT string_agg(i.id::text, ',' ORDER BY i.id), %(now)s
    FROM ins i
    HAVING count(*) > 0
), missed AS (
    -- First occurrences the insert did not take (usually none): an identity
    -- already in the ledger, a line older than its key's newest row, or a
    -- delta too large for the column.
    SELECT s.seq, s.amount, s.reconciliation_key, s.contract_version, s.partition_key
    FROM settle_rows s
    WHERE s.first AND NOT EXISTS (
        SELECT 1 FROM ins i
        WHERE i.reconciliation_key = s.reconciliation_key
          AND i.contract_version = s.contract_version)
), judged AS (
    -- The statement's snapshot: the same prior the insert measured from. A late
    -- line changes nothing, so no delta of it is too large.
    SELECT m.seq, m.reconciliation_key, m.contract_version, {older_missed} AS late,
           abs(m.amount - COALESCE(p.amount, 0)) >= %(limit)s AS too_large
    FROM missed m
    LEFT JOIN LATERAL ({latest_missed}) p ON true
), too_large AS (
    SELECT j.seq FROM judged j WHERE j.too_large AND NOT j.late
), duplicates AS (
    -- A repeat within the chunk, or an identity already in the ledger, or late.
    SELECT s.seq FROM settle_rows s WHERE NOT s.first
    UNION ALL
    SELECT j.seq FROM judged j WHERE j.late OR NOT j.too_large
), outcomes AS (
    INSERT INTO line_outcomes (
        job_id, chunk_id, document_id, line_ref, outcome, reason, amount, claimed_amount,
        delta, reconciliation_key, contract_version, position, correlation_id)
    SELECT %(job_id)s, %(chunk_id)s, o.document_id, o.line_ref, o.outcome, o.reason,
           o.amount, o.claimed_amount, o.delta, o.reconciliation_key, o.contract_version,
           o.position, o.correlation_id
    FROM (
        -- A repeat of a late line within the chunk is late too.
        SELECT s.seq, s.document_id, s.line_ref, 'duplicate' AS outcome,
               CASE WHEN EXISTS (
                   SELECT 1 FROM judged j
                   WHERE j.late AND j.reconciliation_key = s.reconciliation_key
                     AND j.contract_version = s.contract_version
               ) THEN %(late_reason)s END AS reason,
               s.amount, s.claimed_amount, NULL::numeric AS delta, s.reconciliation_key,
               s.contract_version, s.position, s.correlation_id
        FROM settle_rows s JOIN duplicates d ON d.seq = s.seq
        UNION ALL
        SELECT s.seq, s.document_id, s.line_ref, s.outcome, s.note, s.amount,
               s.claimed_amount, i.delta, s.reconciliation_key, s.contract_version, s.position,
               s.correlation_id
        FROM settle_rows s JOIN ins i ON i.reconciliation_key = s.reconciliation_key
                                     AND i.contract_version = s.contract_version
        WHERE s.first AND s.note IS NOT NULL
    ) o
    ORDER BY o.seq
)
SELECT seq, false FROM duplicates
UNION ALL
SELECT seq, true FROM too_large
""".format(
    latest=_latest("s"),
    latest_missed=_latest("m"),
    older=priors.older_than_newest_sql("s", "p"),
    older_missed=priors.older_than_newest_sql("m", "p"),
)


def settle_lines(
    conn: Connection,
    stage_text: str,
    *,
    kind: str,
    job_id: str,
    chunk_id: str,
    now: dt.datetime,
    limit: Decimal,
    repriced: set[str],
) -> tuple[set[int], set[int]]:
    """Stage a chunk's settled lines and settle them in one statement; the stage
    numbers (``seq``) of the lines that are duplicates, and of those whose
    delta is not below ``limit`` (nothing written for them)."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        # Emptied at every commit and rollback, so it only ever holds this chunk's rows.
        # No JIT for this transaction: once the ledger is large, the settle
        # statement's estimated cost passes jit_above_cost, and compiling it costs
        # ~15 ms a chunk (3 µs a line) to run a plan of index probes that takes
        # less (measured on PostgreSQL 15 with 100,000 ledger rows). Same round trip.
        cursor.execute(STAGE_TABLE + ";\nSET LOCAL jit = off")
    finally:
        cursor.close()
    copy_text(conn, "settle_rows", STAGE_COLUMNS, stage_text)
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        params = {"kind": kind, "job_id": job_id, "chunk_id": chunk_id, "now": now}
        cursor.execute(
            _SETTLE,
            {
                **params,
                "limit": limit,
                "repriced": sorted(repriced),
                "late_reason": NEWER_VERSION_SETTLED,
            },
        )
        duplicates: set[int] = set()
        too_large: set[int] = set()
        for seq, out_of_range in cursor.fetchall():
            (too_large if out_of_range else duplicates).add(seq)
        return duplicates, too_large
    finally:
        cursor.close()
