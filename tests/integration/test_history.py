"""A line's story and a document's lines without their job
(docs/api.md#ledger-history-and-search, shared/adapters/db/ledger/read/history.py), on
both ledgers."""

from __future__ import annotations

from decimal import Decimal

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, text

from shared.adapters.db import tables
from shared.adapters.db.disputes import queue as disputes
from shared.adapters.db.engine import make_engine
from shared.adapters.db.ledger.read import history
from shared.adapters.db.migrate import alembic_config
from shared.domain.disputes import ResolveRequest
from tests.support.disputes import (
    ACTOR,
    disputed_doc,
    job_disputes,
    new_vendor,
    resolutions_of,
    row,
    settle,
)
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import create_database, drop_database

pytestmark = pytest.mark.both_backends


def test_an_identitys_story_is_its_rows_oldest_first_and_adds_up(engine: Engine) -> None:
    """v1 disputed, resolved, then re-priced at v2: three rows whose deltas add
    up to what the line amounts to now."""
    vendor = new_vendor(engine)
    doc = disputed_doc(vendor, ["1.50", "1.00"])
    v1 = settle(engine, [doc])
    [dispute] = job_disputes(engine, v1, [doc])
    disputes.resolve(engine, dispute, ResolveRequest("settle_at", "agreed", Decimal("1.2")), ACTOR)
    [resolved] = resolutions_of(engine, dispute)
    v2 = settle(engine, [disputed_doc(vendor, ["1.50", "1.00"], 2, doc["document_id"])])
    key = row(engine, dispute).reconciliation_key

    rows = history.identity(engine, key)
    assert [(r.outcome, r.contract_version, r.job_id) for r in rows] == [
        ("disputed", 1, v1),
        ("resolved", 1, v1),
        ("disputed", 2, v2),
    ]
    assert rows[1].id == resolved.id and rows[1].supersedes_id == dispute
    assert rows[2].supersedes_id == resolved.id
    assert sum(r.delta for r in rows) == rows[-1].amount
    assert {(r.document_id, r.line_ref) for r in rows} == {(doc["document_id"], "1")}
    # Another line's identity is not mixed in, and an unknown key has no story.
    [line_2] = history.document_lines(engine, doc["document_id"], outcome="posted", limit=9)
    assert line_2.line_ref == "2" and line_2.reconciliation_key is not None
    other = history.identity(engine, line_2.reconciliation_key)
    assert [(r.line_ref, r.outcome) for r in other] == [("2", "posted"), ("2", "disputed")]
    assert history.identity(engine, "0" * 64) == []


def test_a_documents_lines_across_its_jobs_include_duplicates_and_dead_letters(
    engine: Engine,
) -> None:
    vendor = new_vendor(engine)
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.70")])
    first = settle(engine, [doc])
    again = settle(engine, [doc])  # the same lines: duplicates
    # An unknown tier is dead-lettered; the known one is a new line.
    lines = [promo_line(3, "8", "1.00"), promo_line(4, "8", "1.00", tier="T9")]
    third = settle(engine, [promo_doc(vendor, lines, document_id=doc["document_id"])])
    # The same document id in another partition is another document.
    settle(engine, [promo_doc(new_vendor(engine), lines[:1], document_id=doc["document_id"])])

    found = history.document_lines(engine, doc["document_id"], partition_key=vendor, limit=100)
    # In line order (issue 42, item 16): each line's ledger row, then the lines
    # the ledger did not take of it.
    assert [(r.job_id, r.line_ref, r.outcome) for r in found] == [
        (first, "1", "posted"),
        (again, "1", "duplicate"),
        (first, "2", "disputed"),
        (again, "2", "duplicate"),
        (third, "3", "posted"),
        (third, "4", "dead_lettered"),
    ]
    assert [r.source for r in found] == ["ledger", "outcome"] * 2 + ["ledger", "outcome"]
    assert {r.partition_key for r in found} == {vendor}
    assert {r.kind for r in found} == {"promo_accrual"}
    assert [r.reason for r in found if r.outcome == "dead_lettered"] == ["unknown_promo_tier"]
    everywhere = history.document_lines(engine, doc["document_id"], limit=100)
    assert len(everywhere) == len(found) + 1

    # Paged, one line at a time, through both sources: the same lines.
    paged, after = [], None
    while True:
        page = history.document_lines(
            engine, doc["document_id"], partition_key=vendor, after=after, limit=1
        )
        paged += page
        if len(page) < 1:
            break
        after = page[-1].cursor
    assert paged == found
    only = history.document_lines(
        engine, doc["document_id"], partition_key=vendor, outcome="duplicate", limit=100
    )
    assert sorted(r.line_ref for r in only) == ["1", "2"]
    assert history.document_lines(engine, "INV-NONE", limit=100) == []


def test_migration_0018_builds_the_document_indexes_concurrently() -> None:
    """On PostgreSQL (no write waits for the build): built, dropped on the way
    down, and built again over what an interrupted build left."""
    name = f"settleq_test_m18_{uid()}"
    url = create_database(name)
    try:
        config = alembic_config(url)
        command.upgrade(config, "0017")
        fresh = make_engine(url)
        try:
            with fresh.begin() as conn:  # an interrupted build: its index, invalid
                conn.execute(
                    text("CREATE INDEX ix_line_outcomes_document ON line_outcomes (job_id)")
                )
            command.upgrade(config, "0018")
            assert _indexes(fresh) >= {"ix_ledger_entries_document", "ix_line_outcomes_document"}
            command.upgrade(config, "head")  # 0037 drops the ledger's: ranges find its rows
            with fresh.connect() as conn:
                assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
            assert "ix_line_outcomes_document" in _indexes(fresh)
            command.downgrade(config, "0017")
            assert not _indexes(fresh) & {"ix_ledger_entries_document", "ix_line_outcomes_document"}
        finally:
            fresh.dispose()
    finally:
        drop_database(name)


def _indexes(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(
            conn.execute(
                text("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
            ).scalars()
        )
