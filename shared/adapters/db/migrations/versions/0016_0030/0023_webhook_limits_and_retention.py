"""webhook limits, fairness and retention

- ``webhook_endpoints.retired_secrets``: the secrets rotated out before the
  latest one (``previous_secret``) and still signing, each until 24 h after
  its own rotation (JSON ``[[secret, until], ...]``);
- ``webhook_endpoints.manual_sends``: when the endpoint's last pings and
  manual retries were asked for (JSON list, the last minute's), for their
  limit of 10 a minute;
- ``webhook_deliveries.leased_until``: a delivery handed to the queue or
  claimed for an attempt, until its attempt is recorded: at most two of an
  endpoint's at once (partial index: only those in flight);
- indexes for the pruner and the API's gauges: deliveries by (status,
  last_attempt_at), events by ``fanned_out_at``.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.add_column(sa.Column("retired_secrets", sa.Text(), nullable=True))
        batch.add_column(sa.Column("manual_sends", sa.Text(), nullable=True))
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.add_column(sa.Column("leased_until", TS, nullable=True))
    op.create_index(
        "ix_webhook_deliveries_in_flight",
        "webhook_deliveries",
        ["endpoint_id"],
        postgresql_where=sa.text("leased_until IS NOT NULL"),
        sqlite_where=sa.text("leased_until IS NOT NULL"),
    )
    op.create_index(
        "ix_webhook_deliveries_status_last_attempt_at",
        "webhook_deliveries",
        ["status", "last_attempt_at"],
    )
    op.create_index("ix_webhook_events_fanned_out_at", "webhook_events", ["fanned_out_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_events_fanned_out_at", table_name="webhook_events")
    op.drop_index("ix_webhook_deliveries_status_last_attempt_at", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_in_flight", table_name="webhook_deliveries")
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_column("leased_until")
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.drop_column("manual_sends")
        batch.drop_column("retired_secrets")
