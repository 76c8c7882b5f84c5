"""Dialect-aware statements (PostgreSQL and SQLite): ``INSERT ... ON CONFLICT DO
NOTHING``, an outcome among several, an id among many."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Connection, Table, any_, bindparam, literal_column
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY


def insert_ignoring_conflicts(
    conn: Connection,
    table: Table,
    index_elements: list[Any] | None = None,
    index_where: ColumnElement[bool] | None = None,
) -> Any:
    """Without ``index_elements`` any unique conflict is ignored; with them (and
    ``index_where`` for a partial index) only a conflict on that index."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing(
        index_elements=index_elements, index_where=index_where
    )


def outcome_in(column: Any, *outcomes: str) -> ColumnElement[bool]:
    """``outcome IN ('a', 'b')`` with the values written out, never bound: only
    then can either planner tell that a partial index over those outcomes
    answers the query (a bound value might be anything)."""
    quoted: list[Any] = [literal_column("'" + o.replace("'", "''") + "'") for o in outcomes]
    condition: ColumnElement[bool] = column.in_(quoted) if len(quoted) > 1 else column == quoted[0]
    return condition


def id_in(column: Any, ids: Sequence[int], dialect: str) -> ColumnElement[bool]:
    """``column IN ids``; one array parameter on PostgreSQL (thousands of binds
    cost more to compile and send than the rows they find)."""
    if dialect == "postgresql":
        return column == any_(bindparam(None, list(ids), type_=ARRAY(BigInteger)))  # type: ignore[no-any-return]
    return column.in_(list(ids))  # type: ignore[no-any-return]
