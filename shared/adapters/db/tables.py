"""The database schema (SQLAlchemy Core): the core tables, and through the
features' table modules it imports, the whole schema (``metadata``).
``ledger_entries`` is the stable table of docs/architecture.md#ledger-schema:
finance queries it directly; rows are never updated or deleted.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    FetchedValue,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

# The features' tables, declared in their own modules on the same metadata
# (schema.py): imported here so that ``metadata`` is the whole schema.
from shared.adapters.db.edi import tables as _edi_tables  # noqa: F401
from shared.adapters.db.operators.tables import audit_log as audit_log
from shared.adapters.db.operators.tables import dispute_resolutions as dispute_resolutions
from shared.adapters.db.operators.tables import producer_keys as producer_keys
from shared.adapters.db.periods import tables as _period_tables  # noqa: F401
from shared.adapters.db.remittances import tables as _remittance_tables  # noqa: F401
from shared.adapters.db.schema import (
    ID,
    JOB_ID,
    KEY,
    OUTCOME_NAME,
    RECONCILIATION_KEY,
    TS,
    default_on_postgresql,
)
from shared.adapters.db.schema import metadata as metadata
from shared.adapters.db.types import (
    BigId,
    id_list_type,
    identity_key,
    money_column_type,
    total_column_type,
)
from shared.domain.kinds import KINDS
from shared.domain.pipeline.events import PERIOD_CLOSED

# The outcomes of the rows settlement writes: one per identity (the unique
# index ``uq_ledger_entries_identity``). A ``resolved`` row is a dispute's resolution.
IDENTITY_OUTCOMES = ("posted", "disputed")
_MATCHES = "outcome IN ('deducted', 'written_off')"
# The outcomes of a remittance's rows (docs/architecture.md#remittances-and-deductions):
# one per deduction, step, document and outcome (``uq_ledger_entries_match``).
MATCH_OUTCOMES = ("deducted", "written_off")

meta = Table(
    "settleq_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

contracts = Table(
    "contracts",
    metadata,
    Column("kind", String(32), primary_key=True),
    Column("partition_key", ID, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("body", Text, nullable=False),
    Column("body_sha256", KEY, nullable=False),
    Column("created_at", TS, nullable=False),
    # Migration 0035: ISO 4217, the body's or SETTLEQ_CURRENCY's at publication;
    # the same in every version of a partition's contract.
    Column("currency", String(3), nullable=False),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("key_id", ID, nullable=False),
    Column("idempotency_key", String(255), nullable=False),
    Column("body_sha256", KEY, nullable=False),
    Column("kind", String(32), nullable=False),
    # "receiving" until every chunk is confirmed by the broker, then "accepted";
    # processing/completed are derived from chunk_results when read.
    Column("state", String(16), nullable=False),
    Column("documents", Integer, nullable=False),
    Column("lines", Integer, nullable=False),
    Column("chunks_total", Integer, nullable=False),
    Column("created_at", TS, nullable=False),
    # What the producer sent: json, ndjson or x12 (an X12 job has EDI rows, edi/tables.py).
    Column("source_format", String(8), nullable=False, server_default="json"),
    UniqueConstraint("key_id", "idempotency_key"),
    Index(None, "created_at"),
)

job_partitions = Table(
    "job_partitions",
    metadata,
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("partition_key", ID, primary_key=True),
    Index(None, "partition_key"),
)

chunks = Table(
    "chunks",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("job_id", ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("documents", Integer, nullable=False),
    Column("lines", Integer, nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("payload_sha256", KEY, nullable=False),
    Column("created_at", TS, nullable=False),
    Index(None, "job_id"),
    Index(None, "created_at"),  # the oldest waiting chunk (dashboard, /metrics)
)

# One row per processed unit of work: a chunk (its processed marker) or a
# requeued dead letter ("rq<id>.<n>"), holding that unit's counter increments.
# Summed when a job is read, so no chunk waits on a hot job row.
chunk_results = Table(
    "chunk_results",
    metadata,
    Column("chunk_id", String(32), primary_key=True),
    Column("job_id", ForeignKey("jobs.id"), nullable=False),
    Column("source", String(16), nullable=False, server_default="chunk"),
    Column("posted", Integer, nullable=False),
    Column("disputed", Integer, nullable=False),
    Column("duplicate", Integer, nullable=False),
    Column("dead_lettered", Integer, nullable=False),
    # Sums of many ledger amounts: wider than the ledger column (see types.py).
    Column("amount_posted", total_column_type(), nullable=False),
    Column("amount_disputed", total_column_type(), nullable=False),
    Column("created_at", TS, nullable=False),
    Index(None, "job_id"),
    Index(None, "created_at"),  # throughput over time (dashboard)
    # Of ``duplicate``, those whose claim differs from their ledger row's (0025).
    Column("claim_differs", Integer, nullable=False, server_default="0"),
)

ledger_entries = Table(
    "ledger_entries",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("reconciliation_key", RECONCILIATION_KEY, nullable=False),
    Column("contract_version", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("partition_key", ID, nullable=False),
    Column("document_id", ID, nullable=False),
    Column("line_ref", ID, nullable=False),
    Column("job_id", JOB_ID, nullable=False),
    Column("outcome", OUTCOME_NAME, nullable=False),
    Column("amount", money_column_type(), nullable=False),
    Column("claimed_amount", money_column_type(), nullable=True),
    Column("delta", money_column_type(), nullable=False),
    Column("supersedes_id", BigId, ForeignKey("ledger_entries.id"), nullable=True),
    Column("correlation_id", ID, nullable=True),
    # The unit's time: a row COPY'd into the ledger takes the transaction's
    # now() by default (migration 0016, PostgreSQL: below), every other row is given it.
    Column("created_at", TS, nullable=False, server_default=FetchedValue()),
    # The line's batch position (shared/domain/pipeline/units.py::chunk_start); null for a
    # ``resolved`` row (not a line) and for rows written before migration 0013.
    Column("position", BigInteger, nullable=True),
    # A recipe row's request's effective_at: where it stands in its (recipe,
    # location)'s lineage, so that a request effective earlier writes nothing
    # (priors.py). Null for the other kinds (their rows stand by contract
    # version) and for rows written before migration 0017.
    Column("effective_at", TS, nullable=True),
    # The booking period open when the row's transaction committed
    # (periods/booking.py, migration 0029).
    Column("period", String(32), nullable=False),
    # Exactly-once resolution: at most one ``resolved`` row per disputed row.
    Index(
        "uq_ledger_entries_resolution",
        "supersedes_id",
        unique=True,
        postgresql_where=text("outcome = 'resolved'"),
        sqlite_where=text("outcome = 'resolved'"),
    ),
    # The dispute queue, oldest first: only disputed rows (~2%) are in it, so
    # posting a line costs this index nothing.
    Index(
        "ix_ledger_entries_disputes",
        "id",
        postgresql_where=text("outcome = 'disputed'"),
        sqlite_where=text("outcome = 'disputed'"),
    ),
    # A job's disputed rows in batch order: its lines page's disputed lines, its
    # disputed total, the dispute queue's job filter. Partial, as the queue's:
    # a posted line costs it nothing. A job's and a document's other rows are
    # found through their id ranges (ledger_job_ranges, ledger_document_ranges).
    Index(
        "ix_ledger_entries_job_disputes",
        "job_id",
        "position",
        "id",
        postgresql_where=text("outcome = 'disputed'"),
        sqlite_where=text("outcome = 'disputed'"),
    ),
    # A remittance's rows: one per deduction, document and outcome, the key
    # saying which (remittances/booking.py), so a replay inserts nothing.
    Index(
        "uq_ledger_entries_match",
        "reconciliation_key",
        unique=True,
        postgresql_where=text(_MATCHES),
        sqlite_where=text(_MATCHES),
    ),
)

default_on_postgresql(ledger_entries.c.created_at, "now()")

# Exactly-once effect: one posted or disputed row per identity and version
# (docs/architecture.md#ledger-schema). Partial: a ``resolved`` row repeats its
# disputed row's key and version. Settlement inserts name this index as their
# conflict target (ledger/). On PostgreSQL it holds the key's 32 bytes
# (``identity_key``, migration 0030).
Index(
    "uq_ledger_entries_identity",
    identity_key(ledger_entries.c.reconciliation_key),
    ledger_entries.c.contract_version,
    unique=True,
    postgresql_where=text("outcome IN ('posted', 'disputed')"),
    sqlite_where=text("outcome IN ('posted', 'disputed')"),
)

# A line's history (a recipe's cost at a location): where the next delta of a
# kind whose delta_basis is line_history is measured from. Partial: the other
# kinds never read it, so they don't pay to keep it. Its predicate names the
# kinds the registry says measure so; a new one needs a migration that rebuilds
# the index (tests/integration/test_ledger_backends.py checks the database's).
LINE_HISTORY_KINDS = sorted(k.name for k in KINDS.values() if k.delta_basis == "line_history")
_line_history = ledger_entries.c.kind.in_(LINE_HISTORY_KINDS)
Index(
    "ix_ledger_entries_line_history",
    ledger_entries.c.kind,
    ledger_entries.c.partition_key,
    ledger_entries.c.line_ref,
    ledger_entries.c.id,
    postgresql_where=_line_history,
    sqlite_where=_line_history,
)

# Where a job's and a document's ledger rows are, as id ranges: one row per
# unit of work a job, one per document a unit (ledger/ranges.py), where an
# index of the ledger's own would cost an entry a line (migration 0037). A
# range may hold other rows too (ids drawn by concurrent units interleave):
# a read through it filters by job or document as well.
ledger_job_ranges = Table(
    "ledger_job_ranges",
    metadata,
    Column("job_id", JOB_ID, primary_key=True),
    Column("first_id", BigInteger, primary_key=True, autoincrement=False),
    Column("last_id", BigInteger, nullable=False),
    # The batch positions of the range's lines (null: none has one).
    Column("first_position", BigInteger, nullable=True),
    Column("last_position", BigInteger, nullable=True),
    # Of its rows, how many have no position (resolutions, matches, rows from
    # before positions): a job's lines page reads them after the positioned ones.
    Column("unpositioned", Integer, nullable=False),
)

ledger_document_ranges = Table(
    "ledger_document_ranges",
    metadata,
    Column("document_id", ID, primary_key=True),
    Column("partition_key", ID, primary_key=True),
    Column("first_id", BigInteger, primary_key=True, autoincrement=False),
    Column("last_id", BigInteger, nullable=False),
)

line_outcomes = Table(
    "line_outcomes",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", JOB_ID, nullable=False),
    Column("chunk_id", String(32), nullable=False),
    Column("document_id", ID, nullable=False),
    Column("line_ref", ID, nullable=False),
    Column("outcome", OUTCOME_NAME, nullable=False),
    Column("reason", String(64), nullable=True),
    Column("amount", money_column_type(), nullable=True),
    Column("claimed_amount", money_column_type(), nullable=True),
    Column("delta", money_column_type(), nullable=True),
    Column("reconciliation_key", RECONCILIATION_KEY, nullable=True),
    Column("contract_version", Integer, nullable=False),
    # The dead letter a dead-lettered line belongs to: a requeue replaces these rows.
    Column("dead_letter_id", BigId, nullable=True),
    Column("position", BigInteger, nullable=True),  # as the ledger's (null before 0013)
    Index(None, "job_id", "outcome", "position", "id"),
    Column("correlation_id", ID, nullable=True),  # the document's, as in the ledger (0014)
    Index("ix_line_outcomes_document", "document_id", "id"),  # GET /v1/lines (0018)
    # A duplicate ``claimed_amount_differs``: its ledger row's claim (0025).
    Column("ledger_claimed_amount", money_column_type(), nullable=True),
    Index(
        "ix_line_outcomes_dead_letter",
        "dead_letter_id",
        postgresql_where=text("dead_letter_id IS NOT NULL"),
        sqlite_where=text("dead_letter_id IS NOT NULL"),
    ),
)

dead_letters = Table(
    "dead_letters",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", String(32), nullable=False),
    Column("chunk_id", String(32), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("partition_key", ID, nullable=False),
    Column("document_id", ID, nullable=True),
    Column("line_ref", ID, nullable=True),  # null for a document-level dead letter
    Column("reason", String(64), nullable=False),
    Column("error_class", String(32), nullable=False),
    Column("message", Text, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("lines", Integer, nullable=False),
    Column("contract_version", Integer, nullable=True),
    Column("payload", Text, nullable=False),
    Column("first_failed_at", TS, nullable=False),
    Column("last_failed_at", TS, nullable=False),
    Column("requeues", Integer, nullable=False, server_default="0"),
    Column("note", Text, nullable=True),
    # A line-level dead letter's position among its document's lines: what its
    # requeue re-runs (a document may repeat a line_ref). Null before 0011.
    Column("line_index", Integer, nullable=True),
    # The batch position of its first line (a line-level one: of its line), which
    # its requeue gives the lines again. Null before 0013, or when not known.
    Column("position", BigInteger, nullable=True),
    Index(None, "job_id"),
    Index(None, "status", "reason"),
)

# The one outbox (docs/architecture.md#events-at-commit-and-the-relay): every
# event a transaction writes for later, typed. ``outcome``: one row per
# committed unit of work, ``ledger_entry_ids`` listing its new ledger rows,
# each one outcome event whose content is read from the ledger when published
# (its event id is stable: shared/domain/pipeline/events.py); the single-event columns
# remain for rows of that older shape. A webhook event type (``job.completed``,
# ``dead_letters.created``, ``dispute.resolved``, ``ping``): its ``evt_`` id in
# ``event_id``, its subject and partitions; the relay fans it out to the
# endpoints that may see it, with its ``data``. ``published_at``: when the
# relay handled the row (published, or fanned out). Outcome rows are kept:
# every ledger row is listed by exactly one, and the ledger feed reads them in
# ``(xid, id)`` order (ledger/read/feed.py); webhook events go once their
# deliveries have (webhooks/retention.py).
OUTCOME = "outcome"
# What the relay publishes to the broker: outcome units and a period's close
# (its own message); every other type is a webhook event, fanned out.
PUBLISHED_TYPES = (OUTCOME, PERIOD_CLOSED)
outbox = Table(
    "outbox",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("event_id", String(64), nullable=True),
    Column("routing_key", String(128), nullable=True),
    Column("partition_key", ID, nullable=True),
    Column("ledger_entry_id", BigId, nullable=True),
    Column("ledger_entry_ids", id_list_type(), nullable=True),  # ascending
    Column("body", Text, nullable=True),
    Column("created_at", TS, nullable=False),
    Column("published_at", TS, nullable=True),
    # The writing transaction's id, by default (migration 0027, PostgreSQL:
    # below; null on SQLite, whose one writer commits in id order).
    Column("xid", BigInteger, nullable=True, server_default=FetchedValue()),
    Column("type", String(32), nullable=False, server_default=OUTCOME),
    Column("subject", ID, nullable=True),  # a job id, a dispute id, an endpoint id (ping)
    # A JSON array, never joined text: a partition key may hold any separator
    # (docs/api.md#partition-keys-and-document-ids). None for a ping.
    Column("partitions", JSON, nullable=True),
    Column("endpoint_id", String(32), nullable=True),  # a ping's one endpoint
    Column("data", Text, nullable=True),  # a webhook event's JSON, rendered at fan-out
    Index("uq_outbox_event_id", "event_id", unique=True),
    # The relay's: what is left to publish or fan out, by type, in id order.
    Index(
        "ix_outbox_unpublished",
        "type",
        "id",
        postgresql_where=text("published_at IS NULL"),
        sqlite_where=text("published_at IS NULL"),
    ),
    Index("ix_outbox_feed", "xid", "id"),
    # The pruner's: webhook events fanned out long ago.
    Index(
        "ix_outbox_swept_events",
        "published_at",
        postgresql_where=text("type <> 'outcome'"),
        sqlite_where=text("type <> 'outcome'"),
    ),
)

default_on_postgresql(outbox.c.xid, "(pg_current_xact_id()::text::bigint)")

# Webhook endpoints (docs/api.md#webhooks): a producer key's HTTPS receivers.
# ``secret`` is the key material the signer needs (HMAC signs with the key
# itself, so it cannot be stored hashed); it is never logged, shown again or
# put in an error. A rotated secret keeps signing until ``previous_until``.
webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", String(32), primary_key=True),  # we_ + 24 hex digits
    Column("key_id", ID, nullable=False),
    Column("url", Text, nullable=False),
    Column("events", Text, nullable=False),  # event types, comma-separated, sorted
    Column("description", Text, nullable=True),
    Column("status", String(16), nullable=False),  # enabled, disabled
    Column("disabled_reason", String(64), nullable=True),
    Column("secret", Text, nullable=False),
    Column("previous_secret", Text, nullable=True),
    Column("previous_until", TS, nullable=True),
    Column("failing_since", TS, nullable=True),  # the first failed delivery of a failing run
    Column("created_at", TS, nullable=False),
    # Secrets rotated out before ``previous_secret``, each signing until 24 h
    # after its own rotation: JSON [[secret, until], ...].
    Column("retired_secrets", Text, nullable=True),
    # When the last minute's pings and manual retries were asked for (JSON
    # list): at most 10 a minute.
    Column("manual_sends", Text, nullable=True),
    Index(None, "key_id"),
)

# One event for one endpoint: pending until a 2xx (delivered) or until the
# schedule gives up (failed). ``next_attempt_at`` is when the webhooks
# component next sends it (a claimed delivery's is pushed past its attempt, so
# a delivery whose process died is sent again).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", String(32), primary_key=True),  # dlv_ + 24 hex digits
    Column("event_id", String(32), ForeignKey("outbox.event_id"), nullable=False),
    Column("endpoint_id", ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), nullable=False),
    Column("status", String(16), nullable=False),  # pending, delivered, failed
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", TS, nullable=True),
    Column("first_attempt_at", TS, nullable=True),
    Column("last_attempt_at", TS, nullable=True),
    Column("created_at", TS, nullable=False),
    # Handed to the queue or claimed, until its attempt is recorded: an
    # endpoint has at most two in flight (services/webhooks/scheduler.py).
    Column("leased_until", TS, nullable=True),
    UniqueConstraint("event_id", "endpoint_id"),
    Index(None, "endpoint_id", "created_at"),
    Index(
        "ix_webhook_deliveries_due",
        "next_attempt_at",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
    Index(
        "ix_webhook_deliveries_in_flight",
        "endpoint_id",
        postgresql_where=text("leased_until IS NOT NULL"),
        sqlite_where=text("leased_until IS NOT NULL"),
    ),
    # The pruner's (old delivered and failed ones) and the gauges' (by status).
    Index(None, "status", "last_attempt_at"),
)

# Every attempt of a delivery: its HTTP status or why there was none, its
# latency and the first KiB of the answer (webhook_delivery.ANSWER_BYTES).
webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("delivery_id", ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("at", TS, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("error", String(32), nullable=True),
    Column("detail", Text, nullable=False),
    Column("latency_ms", Integer, nullable=False),
    Column("answer", Text, nullable=False),
    Index(None, "delivery_id", "attempt"),
)
