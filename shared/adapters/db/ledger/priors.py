"""Where a new ledger row's ``delta`` is measured from
(docs/architecture.md#re-pricing-lineage-and-advisory-locks).

An identity's *lineage* is its rows in commit order: the same reconciliation
key (promo, freight: ``key_versions``) or the same (recipe, location)
(``line_history``), always inside one kind and one partition, so one
partition's rows never supersede another's. A new row's previous row is the
latest row of its lineage committed before it, including one written earlier
in the same transaction: so a chunk inserts its rows in *rounds*, the n-th
round holding each lineage's n-th new row, and every round reads the rows the
rounds before it wrote. On PostgreSQL, chunks sharing a lineage take the same
transaction lock before reading, so ids follow commit order within a lineage;
a promo or freight chunk locks only the documents that can have a lineage
(a version above 1, or a partition re-priced), so first versions settle in
parallel, and publishing a version above 1 waits for those (``repriced_partitions``).

The newest row of a lineage is also what a document is judged against: one
older than it (``Standing.older_than``) writes nothing, and its lines are
duplicates, ``newer_version_settled``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from sqlalchemy import BindParameter, Connection, and_, bindparam, select, text, tuple_

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.tables import IDENTITY_OUTCOMES, contracts, ledger_entries
from shared.adapters.db.types import identity_key, identity_keys
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import DeltaBasis
from shared.domain.pipeline.lineage import Standing
from shared.domain.pipeline.settlement import PlannedLine

Lineage = tuple[str, str]  # (partition_key, reconciliation key or line_ref)


class Newest(NamedTuple):
    """A lineage's newest row: the one a new row supersedes (its id, and the
    amount its delta is measured from), where it stands, and its outcome
    (``resolved`` for a dispute's resolution; a preview tells what a line has now)."""

    id: int
    amount: Decimal
    standing: Standing
    outcome: str = ""


Prior = Newest | None

# PostgreSQL keeps every advisory lock in one shared table (64 per connection
# by default, for all of them): a chunk takes at most this many, lineages
# hashed onto them. Two chunks sharing a bucket wait for each other needlessly,
# never wrongly.
LOCK_BUCKETS = 256


def lineage(basis: DeltaBasis, p: PlannedLine) -> Lineage:
    ref = p.line.line_ref if basis == "line_history" else p.line.reconciliation_key
    return (p.document.partition_key, ref)


def lock_group(basis: DeltaBasis, p: PlannedLine) -> str:
    """What a lock covers: a recipe's location, or a whole document (all versions
    of a promo or freight document share its id, so they share its lock)."""
    d = p.document
    return row_lock_group(basis, d.partition_key, d.document_id, p.line.line_ref)


def row_lock_group(basis: DeltaBasis, partition_key: str, document_id: str, line_ref: str) -> str:
    """``lock_group`` of a ledger row (a dispute being resolved)."""
    return f"{partition_key}|{line_ref if basis == 'line_history' else document_id}"


def lock_ids(kind: str, groups: set[str]) -> list[int]:
    """The sorted advisory lock ids of some lock groups (sorted: chunks that share
    some never wait on each other in a cycle)."""
    buckets = set()
    for group in groups:
        digest = hashlib.sha256(f"{kind}|{group}".encode()).digest()
        buckets.add(int.from_bytes(digest[:4], "big") % LOCK_BUCKETS)
    # The high half names settleq's lineage locks; the low half a bucket.
    return sorted((0x5E771E << 32) | b for b in buckets)


def _partition_lock_id(kind: str, partition_key: str) -> int:
    digest = hashlib.sha256(f"{kind}|{partition_key}".encode()).digest()
    # Its own high half: never one of the lineage buckets.
    return (0x5E771F << 32) | int.from_bytes(digest[:4], "big")


def repriced_partitions(
    conn: Connection, kind: str, partitions: set[str], *, lock: bool = True
) -> set[str]:
    """Of ``partitions``, those with a contract above version 1: only there can a
    promo or freight line have an earlier row of its key (a version's rows exist
    only once its contract does, and contracts are never deleted).

    On PostgreSQL it first takes a shared lock on each partition, held until
    commit: publishing a version above 1 takes the same lock exclusively
    (``lock_partition_for_repricing``), so it waits for every transaction that
    found the partition not re-priced, and every later one finds it re-priced.
    A preview, which writes nothing, reads them with ``lock=False``."""
    if not partitions:
        return set()
    if lock and conn.dialect.name == "postgresql":
        ids = sorted({_partition_lock_id(kind, p) for p in partitions})
        conn.execute(
            text(
                "SELECT count(pg_advisory_xact_lock_shared(k))"
                " FROM unnest(CAST(:ks AS bigint[])) AS k"
            ),
            {"ks": ids},
        )
    rows = conn.execute(
        select(contracts.c.partition_key)
        .distinct()
        .where(
            contracts.c.kind == kind,
            contracts.c.version > 1,
            contracts.c.partition_key.in_(sorted(partitions)),
        )
    )
    return {r.partition_key for r in rows}


def lock_partition_for_repricing(conn: Connection, kind: str, partition_key: str) -> None:
    """Publishing a contract above version 1 waits here for the settlements that
    found the partition not re-priced and so took no lineage locks."""
    if conn.dialect.name == "postgresql":
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:k)"), {"k": _partition_lock_id(kind, partition_key)}
        )


def lock_lineages(conn: Connection, kind: str, groups: set[str]) -> None:
    """Serialise, on PostgreSQL, the transactions that may write rows of one
    lineage, until commit. (SQLite already runs one writer at a time.)"""
    if groups:
        lock_lineage_ids(conn, lock_ids(kind, groups))


def lock_lineage_ids(conn: Connection, ids: list[int]) -> None:
    """``lock_lineages`` of ids from ``lock_ids`` (of one kind or merged from
    several, sorted): one statement, however many."""
    if conn.dialect.name != "postgresql" or not ids:
        return
    conn.execute(
        # unnest keeps the array's (sorted) order.
        text("SELECT count(pg_advisory_xact_lock(k)) FROM unnest(CAST(:ks AS bigint[])) AS k"),
        {"ks": sorted(ids)},
    )


def unit_repriced_partitions(
    conn: Connection, kind: str, settled: Sequence[PlannedLine], *, lock: bool = True
) -> set[str]:
    """The unit's partitions with a contract above version 1 (promo, freight),
    read once: they decide both the lineage locks and which lines read their
    lineage's newest row (``may_have_prior``)."""
    if not settled or KINDS[kind].delta_basis != "key_versions":
        return set()
    return repriced_partitions(conn, kind, {p.document.partition_key for p in settled}, lock=lock)


def may_have_prior(basis: DeltaBasis, p: PlannedLine, repriced: set[str]) -> bool:
    """Can the line's lineage already hold a row? Always for a recipe location;
    for a promo or freight line only at a version above 1, or in a partition
    re-priced (``repriced_partitions``): a first version elsewhere has none."""
    if basis == "line_history":
        return True
    return p.document.contract_version > 1 or p.document.partition_key in repriced


def lock_groups(kind: str, settled: Sequence[PlannedLine], repriced: set[str]) -> set[str]:
    """The lineages this unit must lock before reading priors: those that may
    hold a row (``may_have_prior``). So the common case locks nothing: two
    workers settling first versions never wait on each other."""
    basis = KINDS[kind].delta_basis
    groups: set[str] = set()
    doc = None
    for p in settled:
        if basis == "line_history":
            groups.add(lock_group(basis, p))
        elif p.document is not doc:  # a document's lines are consecutive
            doc = p.document
            if may_have_prior(basis, p, repriced):
                groups.add(lock_group(basis, p))
    return groups


def older_than_newest(basis: DeltaBasis, p: PlannedLine, newest: Prior) -> bool:
    """Is the line's document older than its lineage's newest row (``Standing.older_than``)?"""
    return newest is not None and Standing.of(p.document).older_than(newest.standing, basis)


def _chain_position(basis: DeltaBasis, index: int, p: PlannedLine) -> tuple[Any, ...]:
    """Where a line stands in its lineage among the chunk's new rows
    (``Standing.key``), then by position in the chunk."""
    return (Standing.of(p.document).key(basis), index)


def rounds(basis: DeltaBasis, lines: Sequence[PlannedLine]) -> list[list[PlannedLine]]:
    """The lines (one per identity) grouped in rounds: round n holds the n-th
    line of every lineage, in chain order. Almost always a single round."""
    by_lineage: dict[Lineage, list[tuple[tuple[Any, ...], PlannedLine]]] = {}
    for index, p in enumerate(lines):
        by_lineage.setdefault(lineage(basis, p), []).append((_chain_position(basis, index, p), p))
    out: list[list[PlannedLine]] = []
    for members in by_lineage.values():
        members.sort(key=lambda member: member[0])
        for n, (_, p) in enumerate(members):
            if n == len(out):
                out.append([])
            out[n].append(p)
    return out


def latest_rows(
    conn: Connection, kind: str, basis: DeltaBasis, lines: Sequence[PlannedLine]
) -> dict[Lineage, Newest]:
    """The latest committed row (highest id) of each line's lineage."""
    wanted = sorted({lineage(basis, p) for p in lines})
    if basis == "line_history":
        column = ledger_entries.c.line_ref

        def where(batch: list[Lineage]) -> Any:
            return tuple_(ledger_entries.c.partition_key, column).in_(batch)
    else:
        # By key alone, the unique index's prefix; the partition is checked below.
        column = ledger_entries.c.reconciliation_key

        def where(batch: list[Lineage]) -> Any:
            refs = identity_keys([ref for _, ref in batch], conn.dialect.name)
            return identity_key(column).in_(refs)

    # Written into the SQL, not bound: the line-history index is partial on the
    # kind, and a generic plan for ``kind = $1`` (a statement psycopg prepared)
    # could not prove its predicate. A kind is a registry name, never input.
    named_kind: BindParameter[str] = bindparam("kind", kind, literal_execute=True)
    latest: dict[Lineage, Any] = {}
    resolved: dict[int, tuple[int, Decimal, str]] = {}
    wanted_set = set(wanted)
    for start in range(0, len(wanted), 2000):
        query = select(
            ledger_entries.c.partition_key,
            column.label("ref"),
            ledger_entries.c.id,
            ledger_entries.c.amount,
            ledger_entries.c.contract_version,
            ledger_entries.c.effective_at,
            ledger_entries.c.outcome,
        ).where(ledger_entries.c.kind == named_kind, where(wanted[start : start + 2000]))
        if basis == "key_versions":
            query = _with_resolutions(query)
        for r in conn.execute(query).all():
            key = (r.partition_key, r.ref)
            if key in wanted_set and (key not in latest or r.id > latest[key].id):
                latest[key] = r
            if basis == "key_versions" and r.resolution_id is not None:
                resolved[r.id] = (r.resolution_id, r.resolution_amount, "resolved")
    newest = {}
    for key, r in latest.items():
        # A row resolved since is followed by its resolution (the amount decided,
        # under the disputed row's version).
        row_id, amount, outcome = resolved.get(r.id, (r.id, r.amount, r.outcome))
        standing = Standing(r.contract_version, _utc(r.effective_at))
        newest[key] = Newest(row_id, amount, standing, outcome)
    return newest


def _utc(when: dt.datetime | None) -> dt.datetime | None:
    """A time as written, in UTC (SQLite gives it back without its zone)."""
    return when.replace(tzinfo=dt.UTC) if when is not None and when.tzinfo is None else when


def _with_resolutions(query: Any) -> Any:
    """A key's posted and disputed rows (the identity's partial unique index
    finds them only when the query repeats its predicate), each with its
    resolution if it has one: a key's latest row is its latest posted or
    disputed row, or that row's resolution (a dispute is resolved only while
    it is its key's latest row, and then nothing but a newer version follows)."""
    resolution = ledger_entries.alias("resolution")
    joined = ledger_entries.outerjoin(
        resolution,
        and_(
            resolution.c.supersedes_id == ledger_entries.c.id,
            outcome_in(resolution.c.outcome, "resolved"),
        ),
    )
    return (
        query.add_columns(
            resolution.c.id.label("resolution_id"),
            resolution.c.amount.label("resolution_amount"),
        )
        .select_from(joined)
        .where(outcome_in(ledger_entries.c.outcome, *IDENTITY_OUTCOMES))
    )
