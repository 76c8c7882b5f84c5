"""The X12 intake's tables (docs/api.md#edi-intake), on the schema's one metadata.

An interchange is named forever, within the producer key that submitted it,
by its sender (ISA05/ISA06) and control number (ISA13): the unique
constraint, not a read before the write, decides between two API processes
receiving the same one at once. A job's 997 is kept apart
from ``jobs``, whose rows every status read scans: one for 100,000 sets is
megabytes.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    Sequence,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from shared.adapters.db.schema import ID, KEY, TS, metadata
from shared.adapters.db.types import BigId

# ISA13 and GS06 hold at most nine digits: numbers wrap to 1 after this.
CONTROL_NUMBER_MAX = 999_999_999

edi_interchanges = Table(
    "edi_interchanges",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("sender_qualifier", String(8), nullable=False),
    Column("sender_id", ID, nullable=False),
    Column("control_number", String(32), nullable=False),
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("file_sha256", KEY, nullable=False),  # of the whole file as received
    Column("received_at", TS, nullable=False),
    # The producer key that submitted it (its job's): the namespace it is named in.
    Column("key_id", ID, nullable=False),
    Column("sets", Integer, nullable=True),  # its transaction sets; NULL: stored before 0024
    UniqueConstraint(
        "key_id",
        "sender_qualifier",
        "sender_id",
        "control_number",
        name="uq_edi_interchanges_key_id_sender",
    ),
    Index(None, "job_id"),
    # A sender's files whatever the key (its partner's page and the list).
    Index(None, "sender_qualifier", "sender_id", "received_at"),
)

# An operator's profile of a trading partner (docs/api.md#trading-partners):
# what the files of this ISA05/ISA06 sender settle against when their query
# names nothing, and whether they are acknowledged.
edi_partners = Table(
    "edi_partners",
    metadata,
    Column("sender_qualifier", String(8), primary_key=True),
    Column("sender_id", ID, primary_key=True),
    Column("name", Text, nullable=False),
    Column("contract_version", Integer, nullable=False),
    Column("partition_key", ID, nullable=True),  # 810s: the vendor
    Column("period", ID, nullable=True),  # 810s
    Column("acknowledge", String(16), nullable=False),  # always, errors_only, never
    Column("updated_at", TS, nullable=False),
    # Its remittances (migration 0031): the partition its payer's deductions
    # are matched in, the tolerance {"absolute", "percent"} (money strings),
    # reason codes of its own {code: class}, and the days a deduction may be
    # disputed in (none: 30).
    Column("payer_partition_key", ID, nullable=True, index=True),
    Column("tolerance", JSON, nullable=True),
    Column("deduction_reasons", JSON, nullable=True),
    Column("dispute_window_days", Integer, nullable=True),
)

# The producer keys that alone may send a partner's files (its profile's
# ``key_ids``); none: any key may.
edi_partner_keys = Table(
    "edi_partner_keys",
    metadata,
    Column("sender_qualifier", String(8), primary_key=True),
    Column("sender_id", ID, primary_key=True),
    Column("key_id", ID, primary_key=True),
    ForeignKeyConstraint(
        ["sender_qualifier", "sender_id"],
        ["edi_partners.sender_qualifier", "edi_partners.sender_id"],
        name="fk_edi_partner_keys_sender_qualifier_edi_partners",
        ondelete="CASCADE",
    ),
)

# Files refused for their content (422), which store nothing else: kept for
# their sender's health (GET /v1/partners/{q}/{id}), by sender and time.
edi_refusals = Table(
    "edi_refusals",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("sender_qualifier", String(8), nullable=False),
    Column("sender_id", ID, nullable=False),
    Column("key_id", ID, nullable=False),
    Column("received_at", TS, nullable=False),
    Column("code", String(64), nullable=False),  # the first problem's edi_* code
    Column("codes", Text, nullable=False),  # every problem's, comma-separated, sorted
    Column("sets", Integer, nullable=False),  # transaction sets in the file
    Column("sets_at_fault", Integer, nullable=False),  # of them, those a problem names
    Column("file_sha256", KEY, nullable=False),
    Column("message", Text, nullable=True),  # the 422's message; NULL: kept before 0024
    Column("acknowledgement", LargeBinary, nullable=True),  # the 997 it carried, if any
    Index(None, "sender_qualifier", "sender_id", "received_at"),
)

edi_acknowledgements = Table(
    "edi_acknowledgements",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("body", LargeBinary, nullable=False),  # the 997 file, as served
    Column("created_at", TS, nullable=False),
)

# This system's own control numbers (the 997s' ISA13 and GS06), increasing
# across API processes. PostgreSQL hands them out from this sequence, outside
# any transaction; SQLite has no sequences: there a number is the id of a row
# inserted into ``edi_control_numbers`` and deleted in the same transaction
# (AUTOINCREMENT never hands an id out twice). On PostgreSQL that table stays empty.
edi_control_number = Sequence(
    "edi_control_number", minvalue=1, maxvalue=CONTROL_NUMBER_MAX, cycle=True, metadata=metadata
)

edi_control_numbers = Table(
    "edi_control_numbers",
    metadata,
    Column("n", BigId, primary_key=True, autoincrement=True),
    sqlite_autoincrement=True,
)
