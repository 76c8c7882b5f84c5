"""Response shapes of the HTTP API (amounts are strings, docs/api.md#jobs).

A job and a dispute are in shared/wire/, since the webhooks process sends them too."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.domain.disputes import NOTE_MAX_CHARS, NOTE_PATTERN
from shared.wire.disputes import Dispute
from shared.wire.jobs import Job, Outcomes

# A note is stored as text: PostgreSQL refuses a NUL in it. Published with the
# visible character it needs (NOTE_PATTERN), which the route judges itself, so
# that a note of only invisible characters is note_required, not a pattern error.
Note = str
NOTE = Field(
    min_length=1,
    max_length=NOTE_MAX_CHARS,
    pattern=r"^[^\x00]*$",
    json_schema_extra={"pattern": NOTE_PATTERN},
)


class SkippedSet(BaseModel):
    control_number: str  # ST02
    reason: str  # e.g. no_allowance: a valid 810 with nothing to settle


class Accepted(BaseModel):
    job_id: str
    status_url: str
    documents: int
    lines: int
    chunks: int
    # Only in the answer to an application/edi-x12 batch (docs/api.md#edi-intake).
    skipped: list[SkippedSet] | None = Field(
        None, description="X12 only: the transaction sets not settled, and why"
    )
    acknowledgement_url: str | None = Field(
        None, description="X12 only: where the job's 997 is (GET, as the job)"
    )


class PreviewLine(BaseModel):
    """A line of a batch preview, as settlement would leave it (docs/api.md#previewing-a-batch)."""

    partition_key: str
    document_id: str | None
    line_ref: str | None
    position: int | None = Field(description="its place in the batch, as the job would give it")
    contract_version: int | None
    outcome: Literal["posted", "disputed", "duplicate", "dead_lettered"]
    reason: str | None = Field(
        description="a duplicate's (already_settled, repeated_in_batch, newer_version_settled,"
        " claimed_amount_differs), a dead letter's, or a note"
    )
    amount: str | None
    claimed_amount: str | None
    delta: str | None = Field(description="what its ledger row would move; null: none written")
    lines: int | None = Field(
        None, description="only when not 1: the lines a dead-lettered document covers"
    )


class PreviewTotals(BaseModel):
    lines: int
    posted: int
    disputed: int
    duplicate: int
    dead_lettered: int
    amount_posted: str
    amount_disputed: str = Field(description="the disputed lines' claims")
    delta_posted: str
    delta_disputed: str
    delta: str


class BatchPreview(BaseModel):
    """``POST /v1/batches?preview=true``: what submitting the batch now would do."""

    preview: Literal[True]
    kind: str
    lines: list[PreviewLine]
    totals: PreviewTotals
    partitions: dict[str, PreviewTotals]
    digest: str = Field(description="sha256 of the answer without it, as canonical JSON")


class JobPage(BaseModel):
    items: list[Job]
    next_cursor: str | None


class LineOutcome(BaseModel):
    document_id: str
    line_ref: str
    outcome: Literal["posted", "disputed", "duplicate", "dead_lettered"]
    reason: str | None
    amount: str | None
    claimed_amount: str | None
    # A duplicate whose claim differs from its ledger row's (reason
    # claimed_amount_differs): the ledger's claim; claimed_amount is the one sent again.
    ledger_claimed_amount: str | None = None
    delta: str | None
    reconciliation_key: str | None
    contract_version: int
    # A disputed line's dispute (docs/api.md#disputes): open, resolved or superseded.
    dispute_status: Literal["open", "resolved", "superseded"] | None
    # The document's: the producer's, else derived; an X12 set's control
    # numbers, x12:<ISA06>:<ISA13>:<GS06>:<ST02>. Null on lines stored before 0014.
    correlation_id: str | None


class LinePage(BaseModel):
    items: list[LineOutcome]
    next_cursor: str | None


class DocumentLine(LineOutcome):
    """A line of a document found without its job (GET /v1/lines)."""

    job_id: str
    kind: str
    partition_key: str | None  # null only for a duplicate whose identity is gone


class DocumentLinePage(BaseModel):
    items: list[DocumentLine]
    next_cursor: str | None


class IdentityEntry(BaseModel):
    """One ledger row of an identity (GET /v1/identities/{reconciliation_key})."""

    ledger_entry_id: int
    job_id: str
    contract_version: int
    outcome: Literal["posted", "disputed", "resolved"]
    amount: str
    claimed_amount: str | None
    delta: str
    supersedes_id: int | None
    correlation_id: str | None
    created_at: str


class Identity(BaseModel):
    """A line's whole story: its rows oldest first, what it amounts to now (the
    sum of their deltas), its open dispute, if any, and every dispute it had,
    oldest first, each with its resolution (decision, amount, note, decider)."""

    reconciliation_key: str
    kind: str
    partition_key: str
    document_id: str
    line_ref: str
    entries: list[IdentityEntry]
    amount_now: str
    open_dispute: Dispute | None
    disputes: list[Dispute]


class Contract(BaseModel):
    kind: str
    partition_key: str
    version: int
    body: dict[str, Any]
    created_at: str
    currency: str = Field(
        description="ISO 4217: the body's `currency`, or SETTLEQ_CURRENCY's when it was published."
    )


class ContractVersion(BaseModel):
    version: int
    body_sha256: str
    created_at: str


class ContractList(BaseModel):
    kind: str
    partition_key: str
    items: list[ContractVersion]


class ContractSummary(BaseModel):
    kind: str
    partition_key: str
    version: int
    body_sha256: str
    created_at: str


class ContractPage(BaseModel):
    """Every published version, oldest first (docs/api.md#contracts)."""

    items: list[ContractSummary]
    next_cursor: str | None


class Health(BaseModel):
    status: str
    checks: dict[str, str] = {}


class DeadLetter(BaseModel):
    id: int
    job_id: str
    kind: str
    partition_key: str
    document_id: str | None
    line_ref: str | None
    reason: str
    error_class: str
    message: str
    attempts: int
    status: Literal["dead", "requeued", "discarded"]
    lines: int
    contract_version: int | None
    requeues: int
    note: str | None
    first_failed_at: str
    last_failed_at: str
    # The failed line (or document) as compact JSON, cut at 240 characters.
    excerpt: str


class DeadLetterDetail(DeadLetter):
    payload: Any


class DeadLetterPage(BaseModel):
    items: list[DeadLetter]
    next_cursor: str | None


class DeadLetterCount(BaseModel):
    reason: str
    status: str
    count: int
    lines: int


class DeadLetterStats(BaseModel):
    items: list[DeadLetterCount]
    by_status: dict[str, int]


class Requeued(BaseModel):
    requeued: int


class BulkRequeued(BaseModel):
    requeued: int
    # Matching dead letters not requeued because no line of them would settle
    # now (docs/api.md#dead-letters-and-the-audit-log), and how many of them by
    # the reason they would be dead-lettered with again.
    skipped: int = 0
    would_fail_again: dict[str, int] = {}


class Discarded(BaseModel):
    discarded: int


class AuditEntry(BaseModel):
    id: int
    at: str
    actor: str
    action: str
    target: str
    details: dict[str, Any]


class AuditPage(BaseModel):
    items: list[AuditEntry]
    next_cursor: str | None


class Throughput(BaseModel):
    since: str  # start of the first bucket (UTC)
    bucket_s: int
    lines_per_s: list[float]  # one value per bucket, oldest first


class QueueState(BaseModel):
    queue: str
    family: Literal["fast_path", "compute_heavy"]
    delayed: bool  # a delay queue: retries waiting for their backoff
    depth: int  # ready messages
    # Age of the oldest accepted chunk not yet settled, for a queue holding
    # messages (AMQP does not tell a message's age); null when unreadable.
    oldest_age_s: float | None


class RelayState(BaseModel):
    backlog: int  # outbox rows (committed units of work) the relay has not yet published
    # Relay lag: age of the oldest unpublished outbox row; null when none waits.
    lag_s: float | None


class KindMoney(BaseModel):
    """A kind's money settled within the window (strings: it is money)."""

    kind: str
    posted: str
    disputed: str  # claimed by the disputed lines


class ProcessState(BaseModel):
    """A component ``settleq up`` supervises: its restarts, and whether it keeps dying."""

    component: str
    restarts: int
    crash_looping: bool


class DashboardRole(BaseModel):
    role: Literal["viewer", "operator"] = Field(
        description="what the bearer token may do: read (viewer), or also act (operator)"
    )


class DashboardSummary(BaseModel):
    generated_at: str
    range: Literal["10m", "1h", "24h"]
    window_s: int
    # Lines/s of the latest full bucket of ``throughput`` (the chart's last point).
    rate_now: float
    outcomes: Outcomes  # lines that reached each outcome within the window
    money: list[KindMoney]  # per kind, by name, of what settled within the window
    throughput: Throughput
    dead_letters: list[DeadLetterCount]  # all stored dead letters, by reason and status
    queues: list[QueueState]
    queues_error: str | None  # e.g. broker_unavailable: the queues could not be read
    relay: RelayState
    # The supervisor's processes (settleq up); null when it is not read (no
    # SETTLEQ_SUPERVISOR_COUNTS_FILE, or no supervisor writing it).
    processes: list[ProcessState] | None


class KindInfo(BaseModel):
    """What differs by settlement kind, as readers show it (``shared.domain.kinds``)."""

    name: str
    quantum: str = Field(description="what the kind's amounts are rounded to, e.g. 0.01")
    places: int = Field(description="the decimal places its amounts are shown with")
    partition_noun: str = Field(description="what a partition is: vendor, recipe, carrier")
    line_ref_name: str = Field(description="the wire field a line's line_ref is")
    x12_set: str | None = Field(description="the X12 transaction set it comes as, if any")
    line_columns: list[str] = Field(description="its business columns in a job's lines CSV")
    amounts_are_totals: bool = Field(
        description="whether its amounts add up to money totals (a recipe's are unit costs)"
    )
