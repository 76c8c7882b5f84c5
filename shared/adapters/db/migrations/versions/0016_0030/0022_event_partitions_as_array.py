"""webhook_events.partitions: a JSON array instead of comma-joined text

A partition key may hold a comma (docs/api.md#partition-keys-and-document-ids), so a comma-joined list named
other partitions than it was made of: a job for ``VENDOR-A,VENDOR-A`` was
heard by a key scoped to ``VENDOR-A``. The list is now stored as an array.
Existing rows are rebuilt from their source, never split: a job's events from
``job_partitions``, a resolution's from its one partition (the old text whole).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 17:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_JOB_EVENTS = ("job.completed", "dead_letters.created")


def upgrade() -> None:
    with op.batch_alter_table("webhook_events") as batch:
        batch.add_column(sa.Column("partitions", sa.JSON(), nullable=True))
    conn = op.get_bind()
    events = sa.table(
        "webhook_events",
        sa.column("id", sa.String),
        sa.column("type", sa.String),
        sa.column("subject", sa.String),
        sa.column("partition_keys", sa.Text),
        sa.column("partitions", sa.JSON),
    )
    job_partitions = sa.table(
        "job_partitions", sa.column("job_id", sa.String), sa.column("partition_key", sa.String)
    )
    rows = conn.execute(
        sa.select(events.c.id, events.c.type, events.c.subject, events.c.partition_keys).where(
            events.c.partition_keys.is_not(None)
        )
    ).all()
    by_job: dict[str, list[str]] = {}
    for job_id, partition in conn.execute(
        sa.select(job_partitions.c.job_id, job_partitions.c.partition_key)
        .where(job_partitions.c.job_id.in_({r.subject for r in rows if r.type in _JOB_EVENTS}))
        .order_by(job_partitions.c.job_id, job_partitions.c.partition_key)
    ):
        by_job.setdefault(job_id, []).append(partition)
    for r in rows:
        partitions = by_job.get(r.subject, []) if r.type in _JOB_EVENTS else [r.partition_keys]
        conn.execute(sa.update(events).where(events.c.id == r.id).values(partitions=partitions))
    with op.batch_alter_table("webhook_events") as batch:
        batch.drop_column("partition_keys")


def downgrade() -> None:
    with op.batch_alter_table("webhook_events") as batch:
        batch.add_column(sa.Column("partition_keys", sa.Text(), nullable=True))
    # The old text cannot hold a partition with a comma faithfully: refuse to
    # pretend. Events already fanned out need no partitions; waiting ones are
    # written as before, knowingly lossy.
    conn = op.get_bind()
    events = sa.table(
        "webhook_events",
        sa.column("id", sa.String),
        sa.column("partition_keys", sa.Text),
        sa.column("partitions", sa.JSON),
    )
    for r in conn.execute(
        sa.select(events.c.id, events.c.partitions).where(events.c.partitions.is_not(None))
    ):
        conn.execute(
            sa.update(events)
            .where(events.c.id == r.id)
            .values(partition_keys=",".join(r.partitions))
        )
    with op.batch_alter_table("webhook_events") as batch:
        batch.drop_column("partitions")
