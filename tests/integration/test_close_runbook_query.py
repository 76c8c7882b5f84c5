"""The close runbook's query (docs/operations.md, "A close that fails
halfway") finds the session that holds the booking lock, on the real
PostgreSQL: the session a close waits for."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from shared.adapters.db.periods import booking
from tests.support.infra import ServiceEnv

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.regression
def test_the_runbooks_query_finds_the_transaction_a_close_waits_for(test_env: ServiceEnv) -> None:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    runbook = doc.split("\n### A close that fails halfway\n", 1)[1].split("\n### ", 1)[0]
    query = textwrap.dedent(re.search(r"```sql\n(.*?)```", runbook, re.S).group(1))  # type: ignore[union-attr]
    engine = create_engine(test_env.database_url)
    try:
        with engine.connect() as holder, engine.connect() as operator:
            with holder.begin():
                booking.share(holder)  # as a settle transaction does, before its rows
                pid = holder.exec_driver_sql("SELECT pg_backend_pid()").scalar()
                found = [row.pid for row in operator.execute(text(query))]
                assert pid in found, (pid, found)
            found = [row.pid for row in operator.execute(text(query))]
            assert pid not in found
    finally:
        engine.dispose()
