"""Dialect-aware ``INSERT ... ON CONFLICT DO NOTHING`` (PostgreSQL and SQLite)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_ignoring_conflicts(conn: Connection, table: Table) -> Any:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing()
