"""PostgreSQL bulk paths: one round trip per unit per table.

``COPY`` streams a unit's rows in one go (far cheaper a row than executemany
with RETURNING, a round trip each); the ledger writer stages its rows so too
(ledger/postgres.py). Beside ``dialect.py``, not in ``ledger/``: the dispute
queue writes its resolution records and audit entries this way too, and may
use the ledger only through its public face.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def field(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, str):
        # Identifiers never hold control characters; escape only what needs it.
        if "\\" not in value and value.isprintable():
            return value
        return value.translate(_ESCAPES)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict | list):  # a JSON column's value
        return field(json.dumps(value, separators=(",", ":")))
    return str(value)


def copy_rows(
    conn: Connection, table: str, columns: Sequence[str], rows: Iterable[dict[str, Any]]
) -> None:
    """``COPY table (columns) FROM STDIN`` in PostgreSQL's text format."""
    copy_text(
        conn,
        table,
        columns,
        "".join("\t".join(field(row[c]) for c in columns) + "\n" for row in rows),
    )


def copy_text(conn: Connection, table: str, columns: Sequence[str], text: str) -> None:
    """COPY rows already in PostgreSQL's text format (tab-separated, ``\\N`` for NULL)."""
    if not text:
        return
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            copy.write(text.encode())
    finally:
        cursor.close()


def insert_rows(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    """Many rows into a table without conflicts: COPY on PostgreSQL."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        copy_rows(conn, table.name, list(rows[0]), rows)
    else:
        conn.execute(table.insert(), rows)
