"""A period's journal lines as CSV, made by PostgreSQL (docs/api.md#journal-lines).

A closed period of two million rows is streamed at the speed the server
writes ``COPY ... TO STDOUT (FORMAT csv)``: the API only moves the bytes on.
Each cell is what the portable path (services/api/periods/routes.py, and
the SQLite ledger) writes through the one CSV writer: text neutralised
(shared/wire/cells.py), a delta at its kind's quantum and never rounded
(shared/domain/money.py::at_quantum), times ISO-8601 in UTC, CRLF line ends.
``COPY`` takes no bind parameters: every value is quoted by psycopg's
``sql.Literal``.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from psycopg import sql
from sqlalchemy import Engine

from shared.domain import periods as domain
from shared.domain.kinds import KINDS
from shared.wire.cells import FORMULA_START, cell

# The ledger's columns of a line; then what its journal entry's lines carry
# (shared/domain/periods.py::Heading), last, so the columns before them stay
# where they were.
LEDGER = (
    "id",
    "kind",
    "partition_key",
    "correlation_id",
    "reconciliation_key",
    "document_id",
    "line_ref",
    "job_id",
    "outcome",
    "delta",
    "supersedes_id",
    "created_at",
)
HEADED = ("accounting_date", "entity", "currency", "counterparty")
HEADER = ("period", "external_id", *LEDGER, *HEADED)
# Each row with its contract's currency: a subquery, so the columns keep the
# ledger's names (contracts has a kind, a partition_key and a created_at too).
_PRICED = (
    "SELECT l.*, c.currency FROM ledger_entries l LEFT JOIN contracts c"
    " ON c.kind = l.kind AND c.partition_key = l.partition_key AND c.version = l.contract_version"
)
BLOCK = 1 << 16  # bytes handed on at once: a thread hop per block, not per row
_TEXT = ("partition_key", "correlation_id", "document_id", "line_ref")


def _neutral(column: str) -> sql.Composable:
    """A text cell as shared/wire/cells.py::cell writes it."""
    starts = sql.SQL(", ").join(sql.Literal(c) for c in FORMULA_START)
    name = sql.Identifier(column)
    return sql.SQL("CASE WHEN left({n}, 1) IN ({s}) THEN '''' || {n} ELSE {n} END").format(
        n=name, s=starts
    )


def _delta() -> sql.Composable:
    """``delta`` at its kind's quantum, never rounded: trimmed of its zeros
    when it has more places than the quantum (``at_quantum``)."""
    whens = [
        sql.SQL(
            "WHEN kind = {k} THEN CASE WHEN delta = round(delta, {p})"
            " THEN round(delta, {p})::text ELSE trim_scale(delta)::text END"
        ).format(k=sql.Literal(name), p=sql.Literal(_places(kind.quantum)))
        for name, kind in sorted(KINDS.items())
    ]
    return sql.SQL("CASE {} ELSE delta::text END").format(sql.SQL(" ").join(whens))


def _places(quantum: Decimal) -> int:
    exponent = quantum.as_tuple().exponent
    assert isinstance(exponent, int)
    return -exponent


_CREATED = sql.SQL(
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')"
    " || CASE WHEN date_part('microseconds', created_at)::bigint % 1000000 = 0 THEN ''"
    " ELSE to_char(created_at AT TIME ZONE 'UTC', '.US') END || 'Z'"
)


def _query(
    row: Any,
    kind: str | None,
    partitions: list[str] | None,
    booked_on: domain.Accounts,
    heading: domain.Heading,
) -> sql.Composable:
    journaled = [k for k, pair in sorted(booked_on.items()) if pair is not None]
    # An outcome with accounts of its own is an entry of its own
    # (shared/domain/periods.py::line_entry): its id ends with the outcome.
    own = [
        sql.SQL("WHEN kind = {k} AND outcome = {o} THEN {s}").format(
            k=sql.Literal(k), o=sql.Literal(o), s=sql.Literal(f":{o}")
        )
        for k, accounts in sorted(booked_on.items())
        if accounts is not None
        for o in domain.OWN
        if accounts.of(o) is not None
    ]
    suffix = (
        sql.SQL(" || CASE {} ELSE '' END").format(sql.SQL(" ").join(own)) if own else sql.SQL("")
    )
    external = (
        sql.SQL(
            "CASE WHEN kind IN ({ks}) THEN {pre} || kind || ':' || partition_key{suffix} END"
        ).format(
            ks=sql.SQL(", ").join(sql.Literal(k) for k in journaled),
            pre=sql.Literal(f"settleq:{row.name}:"),
            suffix=suffix,
        )
        if journaled
        else sql.SQL("NULL")
    )
    columns = {
        "period": sql.Literal(row.name),
        "external_id": external,
        "id": sql.Identifier("id"),
        "kind": sql.Identifier("kind"),
        "reconciliation_key": sql.Identifier("reconciliation_key"),
        "job_id": sql.Identifier("job_id"),
        "outcome": sql.Identifier("outcome"),
        "delta": _delta(),
        "supersedes_id": sql.Identifier("supersedes_id"),
        "created_at": _CREATED,
        **{name: _neutral(name) for name in _TEXT},
        # COPY quotes an empty string (""), and writes NULL as nothing, as
        # the portable writer writes an empty cell.
        "accounting_date": sql.Literal(heading.accounting_date.isoformat()),
        "entity": sql.Literal(cell(heading.entity) or None),
        # Its contract's (shared/adapters/db/periods/sums.py::priced).
        "currency": sql.SQL("coalesce(currency, {})").format(
            sql.Literal(cell(heading.currency) or None)
        ),
        "counterparty": sql.SQL("cp.name"),
    }
    # Each partition's counterparty, as the heading has it: joined, so a
    # ledger of many vendors is one hash join, not a CASE per row.
    named = sql.SQL(", ").join(
        sql.SQL("({}, {})").format(sql.Literal(k), sql.Literal(cell(v)))
        for k, v in sorted(heading.counterparties.items())
    )
    counterparties = (
        sql.SQL("(VALUES {}) AS cp(partition_key, name)").format(named)
        if heading.counterparties
        else sql.SQL("(SELECT NULL::text AS partition_key, NULL::text AS name) AS cp")
    )
    where = [
        sql.SQL("id > {}").format(sql.Literal(row.after_id)),
        sql.SQL("period = {}").format(sql.Literal(row.name)),
    ]
    if row.last_id is not None:
        where.append(sql.SQL("id <= {}").format(sql.Literal(row.last_id)))
    if kind is not None:
        where.append(sql.SQL("kind = {}").format(sql.Literal(kind)))
    if partitions is not None:
        where.append(
            sql.SQL("partition_key IN ({})").format(
                sql.SQL(", ").join(sql.Literal(p) for p in partitions) if partitions else sql.NULL
            )
        )
    return sql.SQL(
        "COPY (SELECT {cols} FROM ({priced}) AS ledger_entries"
        " LEFT JOIN {cp} USING (partition_key)"
        " WHERE {where} ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)"
    ).format(
        priced=sql.SQL(_PRICED),
        cp=counterparties,
        cols=sql.SQL(", ").join(
            sql.SQL("{} AS {}").format(columns[name], sql.Identifier(name)) for name in HEADER
        ),
        where=sql.SQL(" AND ").join(where),
    )


def csv_blocks(
    engine: Engine,
    row: Any,
    kind: str | None,
    partitions: list[str] | None,
    booked_on: domain.Accounts,
    heading: domain.Heading,
) -> Iterator[bytes]:
    """The CSV of the period ``row``'s lines (of ``kind`` and ``partitions``
    when given), in blocks of about ``BLOCK`` bytes, on its own connection."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        with cursor.copy(_query(row, kind, partitions, booked_on, heading)) as copy:
            block = bytearray()
            for data in copy:
                block += data
                if len(block) >= BLOCK:
                    # No cell holds a line break (identifiers refuse control
                    # characters): every LF ends a row.
                    yield bytes(block).replace(b"\n", b"\r\n")
                    block.clear()
            yield bytes(block).replace(b"\n", b"\r\n")
        raw.commit()
    finally:
        raw.close()
