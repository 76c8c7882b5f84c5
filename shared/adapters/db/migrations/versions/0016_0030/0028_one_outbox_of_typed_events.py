"""One outbox of typed events: webhook events move into ``outbox``

Two outboxes had a poller each. Now every event a transaction writes for
later is an ``outbox`` row with a ``type``: ``outcome`` (a unit's outcome
events, published to the broker; its ``ledger_entry_ids``, read by the ledger
feed) or a webhook event type (``job.completed``, ``dead_letters.created``,
``dispute.resolved``, ``ping``; fanned out to endpoints). ``published_at``
says the sweeper has handled a row (published or fanned out), whatever its
type. A webhook event keeps its ``evt_`` id in ``event_id`` (unique), which
its deliveries reference.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05 21:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
_UNSWEPT = "published_at IS NULL"
_EVENTS = "type <> 'outcome'"


def upgrade() -> None:
    op.drop_index("ix_outbox_unpublished", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("type", sa.String(32), nullable=False, server_default="outcome"))
        batch.add_column(sa.Column("subject", sa.String(128), nullable=True))
        batch.add_column(sa.Column("partitions", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("endpoint_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("data", sa.Text(), nullable=True))
    op.create_index("uq_outbox_event_id", "outbox", ["event_id"], unique=True)
    op.create_index(
        "ix_outbox_unpublished",
        "outbox",
        ["type", "id"],
        postgresql_where=sa.text(_UNSWEPT),
        sqlite_where=sa.text(_UNSWEPT),
    )
    op.create_index(
        "ix_outbox_swept_events",
        "outbox",
        ["published_at"],
        postgresql_where=sa.text(_EVENTS),
        sqlite_where=sa.text(_EVENTS),
    )
    op.execute(
        "INSERT INTO outbox (type, event_id, subject, partitions, endpoint_id, data,"
        " created_at, published_at)"
        " SELECT type, id, subject, partitions, endpoint_id, data, created_at, fanned_out_at"
        " FROM webhook_events ORDER BY created_at, id"
    )
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_constraint("fk_webhook_deliveries_event_id_webhook_events", type_="foreignkey")
        batch.create_foreign_key(
            "fk_webhook_deliveries_event_id_outbox", "outbox", ["event_id"], ["event_id"]
        )
    op.drop_index("ix_webhook_events_fanned_out_at", table_name="webhook_events")
    op.drop_index("ix_webhook_events_waiting", table_name="webhook_events")
    op.drop_table("webhook_events")


def downgrade() -> None:
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(128), nullable=False),
        sa.Column("partitions", sa.JSON(), nullable=True),
        sa.Column("endpoint_id", sa.String(32), nullable=True),
        sa.Column("data", sa.Text(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("fanned_out_at", TS, nullable=True),
    )
    op.create_index(
        "ix_webhook_events_waiting",
        "webhook_events",
        ["created_at"],
        postgresql_where=sa.text("fanned_out_at IS NULL"),
        sqlite_where=sa.text("fanned_out_at IS NULL"),
    )
    op.create_index("ix_webhook_events_fanned_out_at", "webhook_events", ["fanned_out_at"])
    op.execute(
        "INSERT INTO webhook_events (id, type, subject, partitions, endpoint_id, data,"
        " created_at, fanned_out_at)"
        " SELECT event_id, type, subject, partitions, endpoint_id, data, created_at, published_at"
        f" FROM outbox WHERE {_EVENTS}"
    )
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_constraint("fk_webhook_deliveries_event_id_outbox", type_="foreignkey")
        batch.create_foreign_key(
            "fk_webhook_deliveries_event_id_webhook_events", "webhook_events", ["event_id"], ["id"]
        )
    op.execute(f"DELETE FROM outbox WHERE {_EVENTS}")
    op.drop_index("ix_outbox_swept_events", table_name="outbox")
    op.drop_index("ix_outbox_unpublished", table_name="outbox")
    op.drop_index("uq_outbox_event_id", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:
        for column in ("data", "endpoint_id", "partitions", "subject", "type"):
            batch.drop_column(column)
    op.create_index(
        "ix_outbox_unpublished",
        "outbox",
        ["id"],
        postgresql_where=sa.text(_UNSWEPT),
        sqlite_where=sa.text(_UNSWEPT),
    )
