"""The plans PostgreSQL gives the statements a piece of code sends, as it would
run them were a sequential scan of anything its last resort: a test that a read
finds its rows through an index, whatever the planner would prefer on a test's
small tables."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


@contextmanager
def explained(engine: Engine, wanted: Callable[[str], bool]) -> Iterator[list[tuple[str, str]]]:
    """(statement, plan) of every SELECT sent through ``engine`` meanwhile that
    ``wanted`` keeps."""
    found: list[tuple[str, str]] = []

    def explain(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if not statement.lstrip().upper().startswith("SELECT") or not wanted(statement):
            return
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute("EXPLAIN " + statement, parameters)
            found.append((statement, "\n".join(r[0] for r in cursor.fetchall())))
        finally:
            cursor.execute("RESET enable_seqscan")

    event.listen(engine, "before_cursor_execute", explain)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", explain)
