"""The settlement transaction behaves the same on PostgreSQL and SQLite."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from sqlalchemy import Engine, func, select, text

from shared.adapters.db import outbox, tables
from shared.adapters.db.contracts import ContractConflict, put_contract
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.events import event_id
from shared.domain.pipeline.settlement import plan_chunk
from shared.domain.pipeline.units import ChunkRef
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.ledger import commit_plan

pytestmark = pytest.mark.both_backends

KIND = get_kind("promo_accrual")
CONTRACT = PromoContract.model_validate({"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"})


def _chunk(engine: Engine, docs: list[dict]) -> tuple[ChunkRef, list[PromoDocument]]:
    from shared.config.settings import Settings

    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    lines = sum(len(d.lines) for d in parsed)
    return ChunkRef(message["chunk_id"], job_id, "promo_accrual", lines), parsed


def _count(engine: Engine, job_id: str) -> int:
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(ledger.c.job_id == job_id)).scalar_one())


def test_second_commit_of_a_chunk_changes_nothing(engine: Engine) -> None:
    vendor = uid("V-")
    ref, docs = _chunk(engine, [promo_doc(vendor, [promo_line(1, "3", "0.38")])])
    plan = plan_chunk(KIND, docs, {(vendor, 1): CONTRACT})
    with engine.begin() as conn:
        first = commit_plan(conn, ref, plan, 1)
    with engine.begin() as conn:
        second = commit_plan(conn, ref, plan, 2)
    assert first is not None and first.posted == 1
    # 3 * 0.125 = 0.375, a tie at the cent: half up gives 0.38, exact on both backends.
    assert first.amount_posted == Decimal("0.38")
    assert second is None
    assert _count(engine, ref.job_id) == 1
    ledger, outbox = tables.ledger_entries, tables.outbox
    with engine.connect() as conn:
        [(ledger_id, key)] = conn.execute(
            select(ledger.c.id, ledger.c.reconciliation_key).where(ledger.c.job_id == ref.job_id)
        ).all()
        units = conn.execute(select(outbox.c.ledger_entry_ids)).scalars().all()
    # The unit's outbox row, written in the same transaction, lists its new ledger row;
    # the relay publishes it as one event (in its unit's message) whose id is stable.
    assert units.count([ledger_id]) == 1
    assert len(event_id(key, 1)) == 32


def test_same_identity_twice_in_one_chunk_posts_once(engine: Engine) -> None:
    vendor = uid("V-")
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00")])
    ref, docs = _chunk(engine, [doc, dict(doc)])
    with engine.begin() as conn:
        outcome = commit_plan(conn, ref, plan_chunk(KIND, docs, {(vendor, 1): CONTRACT}), 1)
    assert outcome is not None and (outcome.posted, outcome.duplicate) == (1, 1)
    assert _count(engine, ref.job_id) == 1


def test_contract_versions_are_immutable(engine: Engine) -> None:
    vendor = uid("V-")
    body = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
    assert put_contract(engine, "promo_accrual", vendor, 1, body).result == "created"
    assert put_contract(engine, "promo_accrual", vendor, 1, dict(body)).result == "unchanged"
    with pytest.raises(ContractConflict):
        put_contract(engine, "promo_accrual", vendor, 1, {**body, "tolerance": "0.10"})


def test_money_columns_read_back_exact(engine: Engine) -> None:
    vendor = uid("V-")
    ref, docs = _chunk(engine, [promo_doc(vendor, [promo_line(1, "999999.999999", "124999.9999")])])
    with engine.begin() as conn:
        commit_plan(conn, ref, plan_chunk(KIND, docs, {(vendor, 1): CONTRACT}), 1)
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        row = conn.execute(
            select(ledger.c.amount, ledger.c.claimed_amount).where(ledger.c.job_id == ref.job_id)
        ).one()
    # 999999.999999 * 0.125 = 124999.999999875 -> 125000.00
    assert (row.amount, row.claimed_amount) == (Decimal("125000.00"), Decimal("124999.9999"))
    assert isinstance(row.amount, Decimal)


def test_migrations_build_exactly_the_declared_schema(engine: Engine) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from shared.adapters.db.tables import metadata

    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []


def test_the_line_history_index_holds_the_kinds_the_registry_measures_so(engine: Engine) -> None:
    """The index's predicate is read from the registry (Kind.delta_basis) in
    tables.py, but a database has the one its migrations built: a new kind
    measured by line history needs a migration that rebuilds it, and this says so."""
    name = "ix_ledger_entries_line_history"
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            query = (
                "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = :name"
            )
        else:
            query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :name"
        definition = conn.execute(text(query), {"name": name}).scalar_one()
    predicate = definition.split("WHERE", 1)[-1]
    assert sorted(re.findall(r"'([^']+)'", predicate)) == tables.LINE_HISTORY_KINDS, definition


def _publish_what_waits(engine: Engine) -> None:
    while True:
        with engine.begin() as conn:
            published = outbox.next_batch(conn, 1000, 1000).outbox_ids
            outbox.mark_published(conn, published)
        if not published:
            return


def test_the_relay_reads_a_units_events_alike_on_both_backends(engine: Engine) -> None:
    # PostgreSQL hands the relay amounts as NUMERIC text, SQLite as Decimals from
    # their stored text: the messages must not tell the backends apart.

    _publish_what_waits(engine)  # what other tests left unpublished goes first
    vendor = uid("V-")
    lines = [promo_line(1, "3", "0.38"), promo_line(2, "8", "5.00"), promo_line(3, "16", "2.00")]
    ref, docs = _chunk(engine, [promo_doc(vendor, lines)])
    with engine.begin() as conn:
        commit_plan(conn, ref, plan_chunk(KIND, docs, {(vendor, 1): CONTRACT}), 1)
    with engine.begin() as conn:
        batch = outbox.next_batch(conn, 1000, 1000)
    assert len(batch.outbox_ids) == 1 and batch.units[0].events == 3
    assert sorted((m.routing_key, m.count) for m in batch.messages) == [
        ("settlement.disputed.promo_accrual", 1),
        ("settlement.posted.promo_accrual", 2),
    ]
    amounts = {
        e["line_ref"]: (m.routing_key.split(".")[1], e["amount"], e["claimed_amount"], e["delta"])
        for m in batch.messages
        for e in json.loads(m.body)["events"]
    }
    assert amounts == {
        "1": ("posted", "0.3800", "0.3800", "0.3800"),
        "2": ("disputed", "1.0000", "5.0000", "1.0000"),
        "3": ("posted", "2.0000", "2.0000", "2.0000"),
    }


def test_the_relay_publishes_an_outbox_row_of_the_older_one_event_form(engine: Engine) -> None:
    # A row written before migration 0006 (one event per row, its JSON kept), still
    # unpublished at the upgrade: the relay must send it as it was written.
    _publish_what_waits(engine)  # what other tests left unpublished goes first
    vendor = uid("V-")
    body = json.dumps({"event_id": "e" * 32, "job_id": "j1", "correlation_id": "c1"})
    with engine.begin() as conn:
        conn.execute(
            tables.outbox.insert().values(
                event_id="e" * 32,
                routing_key="settlement.posted.promo_accrual",
                partition_key=vendor,
                body=body,
                created_at=func.now(),
            )
        )
    with engine.begin() as conn:
        batch = outbox.next_batch(conn, 1000, 1000)
        outbox.mark_published(conn, batch.outbox_ids)
    [message] = batch.messages
    assert json.loads(message.body) == {"events": [json.loads(body)]}
    [unit] = batch.units
    assert (unit.events, unit.partition_keys, unit.correlation_ids) == (1, {vendor}, {"c1"})


def test_a_line_history_read_names_its_kind_in_the_sql_so_the_partial_index_serves_it(
    engine: Engine,
) -> None:
    """The line-history index is partial (``kind IN (...)``): a plan made for a
    bound ``kind = $1`` (the generic plan a prepared statement falls back to,
    psycopg preparing a query after 5 runs) cannot prove the predicate and
    would not use it. So the kind is written into the SQL."""
    from sqlalchemy import event

    from shared.adapters.db.ledger.priors import latest_rows
    from shared.domain.pipeline.settlement import PlannedLine

    kind = tables.LINE_HISTORY_KINDS[0]
    sent: list[str] = []

    def capture(conn: object, cursor: object, statement: str, *_: object) -> None:
        sent.append(statement)

    line = type("Line", (), {"line_ref": "LOC-1", "reconciliation_key": "0" * 64})()
    document = type("Doc", (), {"partition_key": "R-1", "document_id": "D-1"})()
    planned = PlannedLine(document, line, None, None, "", 0, 0)  # type: ignore[arg-type]
    event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as conn:
            assert latest_rows(conn, kind, "line_history", [planned]) == {}
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    [statement] = [s for s in sent if "FROM ledger_entries" in s]
    assert f"ledger_entries.kind = '{kind}'" in statement, statement
