"""The schema the migrations build is the schema the tables declare, on
PostgreSQL and on SQLite: one database migrated to head, another made by
``metadata.create_all`` from shared/adapters/db/tables.py, and every table's
columns, keys, constraints and indexes read back from both catalogues.

Alembic's ``compare_metadata`` (the other migration tests) does not see an
index's predicate, a server default or a sequence's bounds: a partial index
whose WHERE drifts in a migration or in the tables (the line-history index's
kinds, read from the registry in tables.py but written out in migration 0005)
passes it. Here each index is compared by its definition as the database
keeps it: PostgreSQL's ``pg_indexes.indexdef``, SQLite's ``sqlite_master.sql``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, inspect, text

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import upgrade
from tests.support.factories import uid
from tests.support.infra import create_database, drop_database

pytestmark = pytest.mark.both_backends

# Alembic's own bookkeeping, and SQLite's (AUTOINCREMENT's counters).
NOT_THE_SCHEMA = re.compile(r"alembic_version|sqlite_.*")

# What each database says of its schema, in lines: "what: its definition".
Facts = dict[str, set[str]]


def _postgresql_facts(conn: Connection) -> Facts:
    """Read from the catalogue, as the server normalises it (types with their
    collation, defaults, constraint and index definitions)."""

    def lines(query: str) -> set[str]:
        return {
            " ".join(str(value) for value in row if value != "")
            for row in conn.execute(text(query))
            if not NOT_THE_SCHEMA.fullmatch(row[0])
        }

    return {
        "columns": lines(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),"
            " coalesce('COLLATE ' || co.collname, ''),"
            " CASE WHEN a.attnotnull THEN 'NOT NULL' ELSE 'NULL' END,"
            " coalesce('DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " LEFT JOIN pg_collation co ON co.oid = a.attcollation"
            "  AND a.attcollation <> (SELECT oid FROM pg_collation WHERE collname = 'default')"
            " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
            " AND a.attnum > 0 AND NOT a.attisdropped"
        ),
        # Primary keys, unique, foreign key and check constraints, with their names.
        "constraints": lines(
            "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)"
            " FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid"
            " WHERE c.relnamespace = current_schema()::regnamespace"
        ),
        "indexes": lines(
            "SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        ),
        "sequences": lines(
            "SELECT sequencename, data_type, start_value, min_value, max_value,"
            " increment_by, cycle FROM pg_sequences WHERE schemaname = current_schema()"
        ),
    }


# A one-value IN list is that comparison: PostgreSQL stores ``kind IN ('a')``
# as ``kind = 'a'``, and SQLite's parser turns one into the other too. SQLite
# keeps the text as written, so both spellings are brought to one here.
_ONE_VALUE_IN = re.compile(r"\bIN \(('[^',]*'|\d+)\)")


def _index_sql(sql: str) -> str:
    sql = re.sub(r"\s+", " ", sql.replace('"', "")).strip()
    return _ONE_VALUE_IN.sub(r"= \1", sql)


def _sqlite_facts(conn: Connection) -> Facts:
    """Read from ``PRAGMA table_xinfo`` (declared types, nullability, defaults),
    SQLAlchemy's reading of each table's CREATE TABLE (keys and constraints) and
    ``sqlite_master`` (each index as created)."""
    schema = inspect(conn)
    facts: Facts = {"columns": set(), "constraints": set(), "indexes": set(), "sequences": set()}
    for table in schema.get_table_names():
        if NOT_THE_SCHEMA.fullmatch(table):
            continue
        for _, name, type_, notnull, default, pk, _hidden in conn.exec_driver_sql(
            f'PRAGMA table_xinfo("{table}")'
        ):
            null = "NOT NULL" if notnull else "NULL"
            facts["columns"].add(f"{table} {name} {type_} {null} DEFAULT {default} pk={pk}")
        pk_ = schema.get_pk_constraint(table)
        facts["constraints"].add(f"{table} {pk_['name']} PRIMARY KEY {pk_['constrained_columns']}")
        for uq in schema.get_unique_constraints(table):
            facts["constraints"].add(f"{table} {uq['name']} UNIQUE {uq['column_names']}")
        for fk in schema.get_foreign_keys(table):
            facts["constraints"].add(
                f"{table} {fk['name']} FOREIGN KEY {fk['constrained_columns']} REFERENCES"
                f" {fk['referred_table']}{fk['referred_columns']} {sorted(fk['options'].items())}"
            )
        for ck in schema.get_check_constraints(table):
            facts["constraints"].add(f"{table} {ck['name']} CHECK {ck['sqltext']}")
        create = conn.execute(
            text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"), {"t": table}
        ).scalar_one()
        # SQLite's sequences: a table whose ids are never handed out twice.
        if "AUTOINCREMENT" in create.upper():
            facts["sequences"].add(f"{table} AUTOINCREMENT")
    # An index without SQL is one SQLite makes for a key or unique constraint,
    # compared above as that constraint.
    for table, sql in conn.execute(
        text("SELECT tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    ):
        if not NOT_THE_SCHEMA.fullmatch(table):
            facts["indexes"].add(f"{table} {_index_sql(sql)}")
    return facts


def _facts(url: str) -> Facts:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                return _postgresql_facts(conn)
            return _sqlite_facts(conn)
    finally:
        engine.dispose()


def _declared(url: str) -> None:
    engine = make_engine(url)
    try:
        tables.metadata.create_all(engine)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def schemas(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Facts, Facts]]:
    """(the migrated database's facts, the declared one's), each database
    fresh and dropped afterwards."""
    if backend == "sqlite":
        folder: Path = tmp_path_factory.mktemp("schemas")
        migrated, declared = (
            f"sqlite:///{folder / 'migrated.db'}",
            f"sqlite:///{folder / 'declared.db'}",
        )
        names: list[str] = []
    else:
        names = [f"settleq_test_schema_{uid()}", f"settleq_test_schema_{uid()}"]
        migrated, declared = create_database(names[0]), create_database(names[1])
    try:
        upgrade(migrated)
        _declared(declared)
        yield _facts(migrated), _facts(declared)
    finally:
        for name in names:
            drop_database(name)


@pytest.mark.parametrize("what", ["columns", "constraints", "indexes", "sequences"])
def test_the_migrated_schema_is_the_one_the_tables_declare(
    schemas: tuple[Facts, Facts], what: str
) -> None:
    migrated, declared = (facts[what] for facts in schemas)
    differences = {
        "only migrated": sorted(migrated - declared),
        "only declared": sorted(declared - migrated),
    }
    assert differences == {"only migrated": [], "only declared": []}
    assert migrated  # something was read: two empty readings would agree


def test_index_predicates_are_among_what_is_compared(schemas: tuple[Facts, Facts]) -> None:
    [line_history] = [i for i in schemas[0]["indexes"] if "ix_ledger_entries_line_history" in i]
    assert "WHERE" in line_history and "'recipe_cost'" in line_history, line_history
