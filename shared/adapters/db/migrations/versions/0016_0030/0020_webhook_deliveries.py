"""webhook_events, webhook_deliveries, webhook_attempts: what producers hear back

Three new tables; settlement writes one small row at a job's end and at a
dispute's resolution, and reads none of them.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(128), nullable=False),
        sa.Column("partition_keys", sa.Text(), nullable=True),
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
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "event_id",
            sa.String(32),
            sa.ForeignKey(
                "webhook_events.id", name="fk_webhook_deliveries_event_id_webhook_events"
            ),
            nullable=False,
        ),
        sa.Column(
            "endpoint_id",
            sa.String(32),
            sa.ForeignKey(
                "webhook_endpoints.id",
                name="fk_webhook_deliveries_endpoint_id_webhook_endpoints",
                ondelete="CASCADE",
            ),
            nullable=False,
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", TS, nullable=True),
        sa.Column("first_attempt_at", TS, nullable=True),
        sa.Column("last_attempt_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint(
            "event_id", "endpoint_id", name="uq_webhook_deliveries_event_id_endpoint_id"
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_endpoint_id_created_at",
        "webhook_deliveries",
        ["endpoint_id", "created_at"],
    )
    op.create_index(
        "ix_webhook_deliveries_due",
        "webhook_deliveries",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )
    op.create_table(
        "webhook_attempts",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "delivery_id",
            sa.String(32),
            sa.ForeignKey(
                "webhook_deliveries.id",
                name="fk_webhook_attempts_delivery_id_webhook_deliveries",
                ondelete="CASCADE",
            ),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", TS, nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_webhook_attempts_delivery_id_attempt", "webhook_attempts", ["delivery_id", "attempt"]
    )


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_events")
