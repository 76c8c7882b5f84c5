"""Migration 0015: the ledger's and the outcomes' indexed identifiers are
``COLLATE "C"`` on PostgreSQL (shared/adapters/db/types.py::byte_ordered), and a
row written before keeps its place under the identity's unique index."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateTable

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import alembic_config
from tests.support.factories import uid
from tests.support.infra import create_database, drop_database

COLUMNS = {
    (table, column)
    for table in ("ledger_entries", "line_outcomes")
    for column in ("reconciliation_key", "job_id", "outcome")
}
KEY = "b" * 64


@pytest.fixture
def fresh_url() -> Iterator[str]:
    name = f"settleq_test_m15_{uid()}"
    url = create_database(name)
    try:
        yield url
    finally:
        drop_database(name)


def _collations(engine: Engine) -> dict[tuple[str, str], str | None]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT table_name, column_name, collation_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name IN"
                " ('ledger_entries', 'line_outcomes')"
                " AND column_name IN ('reconciliation_key', 'job_id', 'outcome')"
            )
        ).all()
    return {(r.table_name, r.column_name): r.collation_name for r in rows}


def _insert_again(engine: Engine) -> int:
    """The row of 0014 inserted again as settlement inserts it: 0 rows if the
    identity's unique index still knows it (booked in a period from 0029 on)."""
    with engine.begin() as conn:
        booked = "period" in {c["name"] for c in inspect(conn).get_columns("ledger_entries")}
        period = (", period", ", 'P'") if booked else ("", "")
        return conn.execute(
            text(
                "INSERT INTO ledger_entries (reconciliation_key, contract_version, kind,"
                f" partition_key, document_id, line_ref, job_id, outcome, amount, delta{period[0]},"
                " created_at) VALUES (:key, 1, 'promo_accrual', 'V', 'D', '1', 'j15', 'posted',"
                f" 1, 1{period[1]}, now()) ON CONFLICT DO NOTHING"
            ),
            {"key": KEY},
        ).rowcount


def test_migration_0015_goes_up_and_down(fresh_url: str) -> None:
    config = alembic_config(fresh_url)
    command.upgrade(config, "0014")
    engine = make_engine(fresh_url)
    try:
        assert _insert_again(engine) == 1  # written under the database's locale
        command.upgrade(config, "head")
        assert _collations(engine) == dict.fromkeys(COLUMNS, "C")
        assert _insert_again(engine) == 0
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
            # The partial identity index still serves a look-up by key, as
            # settlement's probe makes it (by the key's bytes, migration 0030).
            conn.execute(text("SET enable_seqscan = off"))  # a one-row table
            plan = conn.execute(
                text(
                    "EXPLAIN SELECT id FROM ledger_entries"
                    " WHERE decode(reconciliation_key, 'hex') = decode(:key, 'hex')"
                    " AND contract_version = 1 AND outcome IN ('posted', 'disputed')"
                ),
                {"key": KEY},
            ).scalars()
            assert "uq_ledger_entries_identity" in "\n".join(plan)
        command.downgrade(config, "0014")
        assert _collations(engine) == dict.fromkeys(COLUMNS)
        assert _insert_again(engine) == 0
        command.upgrade(config, "head")
        assert _collations(engine) == dict.fromkeys(COLUMNS, "C")
    finally:
        engine.dispose()


def test_the_declared_tables_say_collate_c_on_postgresql_only() -> None:
    ddl = str(CreateTable(tables.ledger_entries).compile(dialect=postgresql.dialect()))
    assert 'reconciliation_key VARCHAR(64) COLLATE "C" NOT NULL' in ddl
    assert 'job_id VARCHAR(32) COLLATE "C" NOT NULL' in ddl
    assert "partition_key VARCHAR(128) NOT NULL" in ddl  # a partner's text: its locale
    assert "COLLATE" not in str(
        CreateTable(tables.ledger_entries).compile(dialect=sqlite.dialect())
    )
