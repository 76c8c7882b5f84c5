"""A contract's currency: ``contracts.currency``

Every version stores the ISO 4217 currency its documents settle in: the one
its body names, else SETTLEQ_CURRENCY when it was published
(docs/api.md#contracts). The versions published before are in the currency
the deployment had then: the ``currency`` this migration is run with
(``settleq migrate`` passes SETTLEQ_CURRENCY), USD without one.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-07 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def _currency() -> str:
    named = context.config.attributes.get("currency")
    return str(named) if named else "USD"


def upgrade() -> None:
    # Filled for the versions there are, then no default: every publication names one.
    with op.batch_alter_table("contracts") as batch:
        batch.add_column(
            sa.Column("currency", sa.String(3), nullable=False, server_default=_currency())
        )
    with op.batch_alter_table("contracts") as batch:
        batch.alter_column("currency", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("contracts") as batch:
        batch.drop_column("currency")
