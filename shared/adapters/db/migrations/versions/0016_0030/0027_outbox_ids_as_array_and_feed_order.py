"""outbox: a unit's ledger ids as an array, and its transaction id for the feed

``ledger_entry_ids`` was comma-joined text: nothing could index or join it.
It is now ``BIGINT[]`` (a JSON array on SQLite). A row of the older
one-event form that names one ledger row gets that one id in the array.

``xid`` is the id of the transaction that wrote the unit (PostgreSQL's
``pg_current_xact_id()``, by default): the ledger feed reads units in
``(xid, id)`` order, only below the oldest transaction still running, so that
a unit that commits late is never skipped (docs/architecture.md#the-ledger-feed).
Rows from before this migration get 0: every one of them committed long ago.
Ledger rows that no outbox row lists (written before migration 0004) get
units of their own, already published, at -1: first in the feed.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05 20:40:00
"""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

_BACKFILL_UNIT = 1000  # ledger ids per backfilled unit


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        op.execute(
            "ALTER TABLE outbox ALTER COLUMN ledger_entry_ids TYPE BIGINT[] USING CASE"
            " WHEN ledger_entry_ids IS NOT NULL THEN string_to_array(ledger_entry_ids, ',')::BIGINT[]"
            " WHEN body IS NULL AND ledger_entry_id IS NOT NULL THEN ARRAY[ledger_entry_id]"
            " END"
        )
        # A constant default first (no rewrite: old rows read 0), then the
        # transaction's own id for every row written from now on.
        op.execute("ALTER TABLE outbox ADD COLUMN xid BIGINT DEFAULT 0")
        op.execute(
            "ALTER TABLE outbox ALTER COLUMN xid SET DEFAULT (pg_current_xact_id()::text::bigint)"
        )
        _backfill_pg(conn)
    else:
        _to_json_sqlite(conn)
        with op.batch_alter_table("outbox") as batch:
            batch.alter_column("ledger_entry_ids", type_=sa.JSON(), existing_nullable=True)
            batch.add_column(sa.Column("xid", sa.BigInteger(), nullable=True))
        _backfill_sqlite(conn)
    op.create_index("ix_outbox_feed", "outbox", ["xid", "id"])


def _backfill_pg(conn: sa.Connection) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO outbox (ledger_entry_ids, xid, created_at, published_at)"
            " SELECT array_agg(id ORDER BY id), -1, min(created_at), now() FROM ("
            "  SELECT l.id, l.created_at, (row_number() OVER (ORDER BY l.id) - 1) / :per AS n"
            "  FROM ledger_entries l WHERE l.id IN ("
            "   SELECT id FROM ledger_entries"
            "   EXCEPT SELECT unnest(ledger_entry_ids) FROM outbox)"
            " ) unlisted GROUP BY n ORDER BY n"
        ),
        {"per": _BACKFILL_UNIT},
    )


def _to_json_sqlite(conn: sa.Connection) -> None:
    rows = conn.execute(
        sa.text("SELECT id, ledger_entry_ids, ledger_entry_id, body FROM outbox")
    ).all()
    for row in rows:
        if row.ledger_entry_ids:
            ids = [int(i) for i in row.ledger_entry_ids.split(",")]
        elif row.body is None and row.ledger_entry_id is not None:
            ids = [row.ledger_entry_id]
        else:
            ids = None
        conn.execute(
            sa.text("UPDATE outbox SET ledger_entry_ids = :ids WHERE id = :id"),
            {"ids": None if ids is None else json.dumps(ids), "id": row.id},
        )


def _backfill_sqlite(conn: sa.Connection) -> None:
    listed: set[int] = set()
    for (text,) in conn.execute(
        sa.text("SELECT ledger_entry_ids FROM outbox WHERE ledger_entry_ids IS NOT NULL")
    ):
        listed.update(json.loads(text))
    unlisted = [
        i
        for (i,) in conn.execute(sa.text("SELECT id FROM ledger_entries ORDER BY id"))
        if i not in listed
    ]
    now = dt.datetime.now(dt.UTC)
    for start in range(0, len(unlisted), _BACKFILL_UNIT):
        conn.execute(
            sa.text(
                "INSERT INTO outbox (ledger_entry_ids, xid, created_at, published_at)"
                " VALUES (:ids, -1, :now, :now)"
            ),
            {"ids": json.dumps(unlisted[start : start + _BACKFILL_UNIT]), "now": now},
        )


def downgrade() -> None:
    op.drop_index("ix_outbox_feed", table_name="outbox")
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        op.execute("DELETE FROM outbox WHERE xid = -1")
        op.execute("ALTER TABLE outbox DROP COLUMN xid")
        op.execute(
            "ALTER TABLE outbox ALTER COLUMN ledger_entry_ids TYPE TEXT"
            " USING array_to_string(ledger_entry_ids, ',')"
        )
        return
    op.execute("DELETE FROM outbox WHERE xid = -1")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("xid")
        batch.alter_column("ledger_entry_ids", type_=sa.Text(), existing_nullable=True)
    for row in conn.execute(
        sa.text("SELECT id, ledger_entry_ids FROM outbox WHERE ledger_entry_ids IS NOT NULL")
    ).all():
        conn.execute(
            sa.text("UPDATE outbox SET ledger_entry_ids = :ids WHERE id = :id"),
            {"ids": ",".join(map(str, json.loads(row.ledger_entry_ids))), "id": row.id},
        )
