"""edi_interchanges by producer key; edi_partner_keys; what a refusal said

An interchange is named within the producer key that submitted it
(docs/api.md#duplicate-interchanges: one key's files never block, name or
count against another key's): its
unique constraint gains ``key_id``, filled from its job. Each interchange
keeps how many transaction sets it held (its sender's page counts its own,
not the whole file's; NULL for those stored before). A partner's profile may
name the producer keys that may send its files (``edi_partner_keys``). A kept
refusal keeps its message and the 997 it carried.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05 17:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_OLD_UNIQUE = "uq_edi_interchanges_sender_qualifier_sender_id_control_number"
_NEW_UNIQUE = "uq_edi_interchanges_key_id_sender"


def upgrade() -> None:
    op.add_column("edi_interchanges", sa.Column("key_id", sa.String(128), nullable=True))
    op.add_column("edi_interchanges", sa.Column("sets", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE edi_interchanges SET key_id ="
        " (SELECT jobs.key_id FROM jobs WHERE jobs.id = edi_interchanges.job_id)"
    )
    with op.batch_alter_table("edi_interchanges") as batch:
        batch.alter_column("key_id", existing_type=sa.String(128), nullable=False)
        batch.drop_constraint(_OLD_UNIQUE, type_="unique")
        batch.create_unique_constraint(
            _NEW_UNIQUE, ["key_id", "sender_qualifier", "sender_id", "control_number"]
        )
    # The old unique constraint served a sender's lookups whatever the key.
    op.create_index(
        "ix_edi_interchanges_sender_qualifier_sender_id_received_at",
        "edi_interchanges",
        ["sender_qualifier", "sender_id", "received_at"],
    )
    op.create_table(
        "edi_partner_keys",
        sa.Column("sender_qualifier", sa.String(8), nullable=False),
        sa.Column("sender_id", sa.String(128), nullable=False),
        sa.Column("key_id", sa.String(128), nullable=False),
        sa.ForeignKeyConstraint(
            ["sender_qualifier", "sender_id"],
            ["edi_partners.sender_qualifier", "edi_partners.sender_id"],
            name="fk_edi_partner_keys_sender_qualifier_edi_partners",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "sender_qualifier", "sender_id", "key_id", name="pk_edi_partner_keys"
        ),
    )
    op.add_column("edi_refusals", sa.Column("message", sa.Text(), nullable=True))
    op.add_column("edi_refusals", sa.Column("acknowledgement", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("edi_refusals") as batch:
        batch.drop_column("acknowledgement")
        batch.drop_column("message")
    op.drop_table("edi_partner_keys")
    op.drop_index(
        "ix_edi_interchanges_sender_qualifier_sender_id_received_at", table_name="edi_interchanges"
    )
    # Interchanges of one sender and number from several keys cannot all stay.
    op.execute(
        "DELETE FROM edi_interchanges WHERE id NOT IN (SELECT min(id) FROM edi_interchanges"
        " GROUP BY sender_qualifier, sender_id, control_number)"
    )
    with op.batch_alter_table("edi_interchanges") as batch:
        batch.drop_constraint(_NEW_UNIQUE, type_="unique")
        batch.create_unique_constraint(
            _OLD_UNIQUE, ["sender_qualifier", "sender_id", "control_number"]
        )
        batch.drop_column("sets")
        batch.drop_column("key_id")
