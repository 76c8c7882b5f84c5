"""The outbox's migrations: 0027, a unit's ledger ids become an array and every
ledger row is in exactly one unit the feed reads
(docs/architecture.md#the-ledger-feed); 0028, webhook events become typed rows
of the one outbox."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.ledger.read import feed
from shared.adapters.db.migrate import alembic_config
from shared.domain.feed import START
from tests.support.factories import uid
from tests.support.infra import create_database, drop_database

pytestmark = pytest.mark.both_backends


@pytest.fixture
def fresh_url(backend: str, tmp_path: Any) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    name = f"settleq_test_m27_{uid()}"
    url = create_database(name)
    try:
        yield url
    finally:
        drop_database(name)


def _row(n: int) -> dict[str, Any]:
    return {
        "reconciliation_key": f"{n:064x}",
        "contract_version": 1,
        "kind": "promo_accrual",
        "partition_key": "V",
        "document_id": f"D{n}",
        "line_ref": "1",
        "job_id": "j27",
        "outcome": "posted",
        "amount": Decimal("1.00"),
        "claimed_amount": None,
        "delta": Decimal("1.00"),
        "created_at": dt.datetime.now(dt.UTC),
    }


def test_migration_0027_lists_every_ledger_row_in_one_unit_and_goes_down(fresh_url: str) -> None:
    """Before: units of joined text, a unit of the older one-event form, and a
    ledger row no unit lists. After: arrays, the unlisted row in a unit of its
    own, and the feed gives every row once. Down and up again: the declared schema."""
    config = alembic_config(fresh_url)
    command.upgrade(config, "0026")
    engine = make_engine(fresh_url)
    outbox = sa.table(
        "outbox",
        sa.column("ledger_entry_ids", sa.Text),
        sa.column("ledger_entry_id", sa.BigInteger),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    try:
        with engine.begin() as conn:
            ids = [
                conn.execute(
                    sa.insert(tables.ledger_entries).values(**_row(n)).returning(sa.text("id"))
                ).scalar_one()
                for n in range(1, 6)
            ]
            now = dt.datetime.now(dt.UTC)
            conn.execute(
                sa.insert(outbox).values(created_at=now),
                [
                    {"ledger_entry_ids": f"{ids[0]},{ids[1]}", "ledger_entry_id": None},
                    {"ledger_entry_ids": None, "ledger_entry_id": ids[2]},  # one-event form
                    {"ledger_entry_ids": str(ids[3]), "ledger_entry_id": None},
                ],
            )
        # ids[4] is listed by no unit.
        command.upgrade(config, "head")
        with engine.connect() as conn:
            units = conn.execute(
                sa.select(tables.outbox.c.ledger_entry_ids).order_by(tables.outbox.c.id)
            ).scalars()
            assert list(units) == [[ids[0], ids[1]], [ids[2]], [ids[3]], [ids[4]]]
            page = feed.page(conn, START, partitions=None, kind=None, limit=100)
            assert sorted(r.id for r in page.rows) == ids
            assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
        command.downgrade(config, "0026")
        with engine.connect() as conn:
            texts = conn.execute(sa.text("SELECT ledger_entry_ids FROM outbox ORDER BY id"))
            assert [t for (t,) in texts] == [f"{ids[0]},{ids[1]}", str(ids[2]), str(ids[3])]
        command.upgrade(config, "head")
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
    finally:
        engine.dispose()


def test_migration_0028_moves_webhook_events_into_the_outbox_and_back(fresh_url: str) -> None:
    """A webhook event waiting and one fanned out (with its delivery) become
    typed outbox rows, their deliveries still theirs; down, they are back."""
    config = alembic_config(fresh_url)
    command.upgrade(config, "0027")
    engine = make_engine(fresh_url)
    now = dt.datetime.now(dt.UTC)
    events = sa.table(
        "webhook_events",
        *(sa.column(c) for c in ("id", "type", "subject", "endpoint_id", "data")),
        sa.column("partitions", sa.JSON),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("fanned_out_at", sa.DateTime(timezone=True)),
    )
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.insert(tables.webhook_endpoints).values(
                    id="we_1",
                    key_id="k",
                    url="https://h.example/",
                    events="job.completed",
                    status="enabled",
                    secret="s",
                    created_at=now,
                )
            )
            conn.execute(
                sa.insert(events),
                [
                    {
                        "id": "evt_waiting",
                        "type": "job.completed",
                        "subject": "J1",
                        "endpoint_id": None,
                        "data": None,
                        "partitions": ["V,1"],
                        "created_at": now,
                        "fanned_out_at": None,
                    },
                    {
                        "id": "evt_fanned",
                        "type": "ping",
                        "subject": "we_1",
                        "endpoint_id": "we_1",
                        "data": "{}",
                        "partitions": None,
                        "created_at": now,
                        "fanned_out_at": now,
                    },
                ],
            )
            conn.execute(
                sa.insert(tables.webhook_deliveries).values(
                    id="dlv_1",
                    event_id="evt_fanned",
                    endpoint_id="we_1",
                    status="pending",
                    attempts=0,
                    next_attempt_at=now,
                    created_at=now,
                )
            )
        command.upgrade(config, "head")
        o = tables.outbox
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(o.c.event_id, o.c.type, o.c.partitions, o.c.published_at.is_not(None))
                .where(o.c.type != tables.OUTCOME)
                .order_by(o.c.event_id)
            ).all()
            assert [tuple(r) for r in rows] == [
                ("evt_fanned", "ping", None, True),
                ("evt_waiting", "job.completed", ["V,1"], False),
            ]
            joined = conn.execute(
                sa.select(o.c.type).join(
                    tables.webhook_deliveries,
                    tables.webhook_deliveries.c.event_id == o.c.event_id,
                )
            ).scalars()
            assert list(joined) == ["ping"]
            assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
        command.downgrade(config, "0027")
        with engine.connect() as conn:
            back = conn.execute(
                sa.text("SELECT id, fanned_out_at IS NOT NULL FROM webhook_events ORDER BY id")
            ).all()
            assert [tuple(r) for r in back] == [("evt_fanned", True), ("evt_waiting", False)]
        command.upgrade(config, "head")
    finally:
        engine.dispose()
