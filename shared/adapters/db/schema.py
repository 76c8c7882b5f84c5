"""What every table module declares its tables with: the schema's one
``MetaData`` (its naming convention) and the column types tables share.

The tables themselves are declared in ``tables.py`` and in the features' own
table modules (``edi/tables.py``, ``periods/tables.py``, ``operators/tables.py``),
each importing this module and never one another. ``tables.py`` imports every
table module, so ``tables.metadata`` (this same object) holds the whole schema:
what Alembic compares with and ``create_all`` builds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Connection, DateTime, MetaData, String, Table, event

from shared.adapters.db.types import byte_ordered

metadata: MetaData = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

KEY = String(64)  # lower-case hex SHA-256
# The ledger's and the outcomes' indexed identifiers, compared byte by byte;
# OUTCOME_NAME holds an outcome's name (posted, disputed, resolved, ...).
RECONCILIATION_KEY, JOB_ID, OUTCOME_NAME = byte_ordered(64), byte_ordered(32), byte_ordered(16)
ID: String = String(128)
TS: DateTime = DateTime(timezone=True)


def default_on_postgresql(column: Column[Any], sql: str) -> None:
    """Give ``column`` (of a declared table) the server default ``sql`` on
    PostgreSQL alone, as its migration did: SQLite's tables keep none (adding
    one there rebuilds the table). Declare the column with
    ``server_default=FetchedValue()``: the server fills it in, and its DDL
    comes from here, run after the table is created."""
    table, name = column.table, column.name

    def set_default(target: Table, connection: Connection, **_: Any) -> None:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(
                f"ALTER TABLE {table.name} ALTER COLUMN {name} SET DEFAULT {sql}"
            )

    event.listen(table, "after_create", set_default)
