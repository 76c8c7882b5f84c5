"""Failures are isolated and recorded (docs/architecture.md#failures-and-reason-codes, issue 3), on
the real services."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk, validate_chunk
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db import tables
from shared.adapters.db.jobs.lines import list_lines
from shared.adapters.db.jobs.queries import job_status
from shared.domain.pipeline.messages import ChunkMessage
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import queue_depth
from tests.support.ledger import dead_letters, ledger_rows
from tests.support.tamper import replace_stored_payload


@pytest.fixture(scope="module")
def vendor(ctx: WorkerContext) -> str:
    name = uid("V-")
    publish_promo_contracts(ctx.engine, [name])
    return name


def test_one_poison_document_among_749_dead_letters_alone(ctx, vendor):
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")]) for _ in range(750)]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    stored = [json.dumps(d) for d in docs]
    stored[400] = json.dumps({**docs[400], "contract_version": "seven"})  # poison
    message = replace_stored_payload(
        ctx.engine, ctx.internal_key, message, ("[" + ",".join(stored) + "]").encode()
    )
    outcome = settle_chunk(ctx, message, 1)
    assert outcome is not None and (outcome.posted, outcome.dead_lettered) == (749, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.document_id, letter.lines, letter.attempts) == (
        "schema_invalid",
        docs[400]["document_id"],
        1,
        1,
    )
    assert len(ledger_rows(ctx.engine, job_id)) == 749
    status = job_status(ctx.engine, job_id)
    assert status is not None and sum(status.outcomes.values()) == status.lines == 750


def test_unreadable_chunk_is_dead_lettered_whole_on_attempt_one(ctx, vendor):
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00")])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    message = replace_stored_payload(ctx.engine, ctx.internal_key, message, b"not json at all")
    validate_chunk(ctx, message, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.error_class, letter.attempts, letter.lines) == (
        "schema_invalid",
        "StructuralError",
        1,
        2,
    )
    assert letter.document_id is None and letter.payload == "not json at all"


def requeue(ctx: WorkerContext, dead_letter_id: int) -> dict:
    """What the operator API does: mark requeued, then build the signed message."""
    with ctx.engine.begin() as conn:
        marked = dl_db.mark_requeued(conn, dead_letter_id)
        chunk = conn.execute(
            select(tables.chunks.c.payload_sha256).where(tables.chunks.c.id == marked.chunk_id)
        ).scalar_one()
    return ChunkMessage(
        marked.chunk_id, marked.job_id, marked.kind, chunk, marked.id, marked.requeues
    ).signed(ctx.internal_key)


@pytest.mark.both_backends
def test_requeued_dead_letters_post_and_move_the_counters_once(ctx):
    vendor = uid("V-")  # no contract yet
    docs = [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "16", "2.00")]),
        promo_doc(vendor, [promo_line(1, "8", "1.00", tier="T7")]),
    ]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    settle_chunk(ctx, message, 1)
    letters = dead_letters(ctx.engine, job_id)
    assert [(d.reason, d.lines) for d in letters] == [
        ("unknown_contract_version", 2),
        ("unknown_contract_version", 1),
    ]
    before = job_status(ctx.engine, job_id)
    assert before is not None and before.outcomes["dead_lettered"] == 3

    publish_promo_contracts(ctx.engine, [vendor])
    messages = [requeue(ctx, d.id) for d in letters]
    for m in messages:
        settle_chunk(ctx, m, 1)
        assert settle_chunk(ctx, m, 2) is None  # a redelivered requeue changes nothing

    after = job_status(ctx.engine, job_id)
    assert after is not None and after.state == "completed"
    assert after.chunks_done == after.chunks_total == 1  # requeues are not chunks
    # Two lines posted; the T7 line now fails on its own, as a new line-level dead letter.
    assert after.outcomes == {"posted": 2, "disputed": 0, "duplicate": 0, "dead_lettered": 1}
    assert sum(after.outcomes.values()) == after.lines == 3
    now = {(d.reason, d.status, d.line_ref) for d in dead_letters(ctx.engine, job_id)}
    assert now == {
        ("unknown_contract_version", "requeued", None),
        ("unknown_promo_tier", "dead", "1"),
    }
    assert len(ledger_rows(ctx.engine, job_id)) == 2
    lines = list_lines(ctx.engine, job_id, outcome=None, after=None, limit=100)
    assert sorted(line.outcome for line in lines) == ["dead_lettered", "posted", "posted"]
    # The same dead letter cannot be requeued twice.
    with ctx.engine.begin() as conn:
        assert dl_db.mark_requeued(conn, letters[0].id) is None


@pytest.mark.both_backends
def test_stale_requeue_message_is_dropped(ctx, vendor):
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00", tier="T8")])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    settle_chunk(ctx, message, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    first = requeue(ctx, letter.id)
    forged_again = {**first}
    settle_chunk(ctx, first, 1)  # fails again: a new dead letter, the old one stays requeued
    assert settle_chunk(ctx, forged_again, 1) is None
    assert [d.status for d in dead_letters(ctx.engine, job_id)] == ["requeued", "dead"]
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.outcomes["dead_lettered"] == 1


@pytest.mark.both_backends
def test_validate_forwards_a_requeue_to_settlement(ctx):
    vendor = uid("V-")
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    settle_chunk(ctx, message, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    depth = queue_depth(ctx.settings.queue_prefix, "compute_heavy")
    validate_chunk(ctx, requeue(ctx, letter.id), 1)
    assert queue_depth(ctx.settings.queue_prefix, "compute_heavy") == depth + 1


def test_a_real_lock_timeout_is_classified_transient(ctx):
    """PostgreSQL refusing to wait for a lock surfaces as a retryable failure."""
    from sqlalchemy import text

    from services.worker.failures import is_transient

    holder = ctx.engine.connect()
    try:
        holder.execute(text("LOCK TABLE settleq_meta IN ACCESS EXCLUSIVE MODE"))
        with ctx.engine.connect() as waiter:
            waiter.execute(text("SET lock_timeout = '50ms'"))
            with pytest.raises(Exception) as err:
                waiter.execute(text("SELECT * FROM settleq_meta"))
            waiter.rollback()
        assert is_transient(err.value), type(err.value)
    finally:
        holder.rollback()
        holder.close()


def test_a_jobs_priority_travels_from_the_fast_path_to_settlement(ctx, vendor):
    """Fairness (docs/architecture.md#isolation-and-fairness): a big job's chunks keep its low
    priority on the second tier too, so a small job's chunk, at the top priority, is delivered
    before them."""
    import json as jsonlib

    import pika

    from shared.domain.pipeline.messages import MAX_PRIORITY, priority_for
    from tests.support.infra import BROKER_URL

    assert priority_for(10) == MAX_PRIORITY > priority_for(500_000)
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    fields = {k: message[k] for k in ("chunk_id", "job_id", "kind", "payload_sha256")}
    big = ChunkMessage(**fields, priority=priority_for(500_000)).signed(ctx.internal_key)
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    channel = connection.channel()
    queue = ctx.settings.queue_name("compute_heavy")
    try:
        channel.queue_purge(queue)
        validate_chunk(ctx, big, 1)
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        assert method is not None
        forwarded = jsonlib.loads(body)["args"][0]
        assert properties.priority == forwarded["priority"] == priority_for(500_000)
        assert forwarded["job_id"] == job_id
    finally:
        connection.close()


def _stored_with_a_repeated_line_no(ctx: WorkerContext, vendor: str) -> tuple[str, dict]:
    """A stored chunk whose document repeats line_no 1, the poison line second: the
    front door refuses that now (duplicate_line), a chunk stored before may hold it."""
    lines = [promo_line(1, "8", "1.00", sku="SKU-A"), promo_line(2, "8", "1.00", sku="SKU-B")]
    doc = promo_doc(vendor, lines)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, [doc])
    doc["lines"][1] = promo_line(1, "8", "1.00", sku="SKU-B", tier="T9")
    payload = json.dumps([doc]).encode()
    return job_id, replace_stored_payload(ctx.engine, ctx.internal_key, message, payload)


def _assert_counts_add_up(ctx: WorkerContext, job_id: str) -> None:
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.lines == 2
    assert status.outcomes == {"posted": 1, "disputed": 0, "duplicate": 0, "dead_lettered": 1}
    assert len(list_lines(ctx.engine, job_id, outcome=None, after=None, limit=100)) == 2


@pytest.mark.regression
@pytest.mark.both_backends
@pytest.mark.parametrize("stored", ["now", "before_line_index"])
def test_requeue_reruns_only_the_dead_lettered_line_of_a_repeated_line_no(ctx, vendor, stored):
    """Issue 12 item 5: each requeue re-ran both lines numbered 1, adding an outcome
    the job does not have. A dead letter stored before its line's position was
    recorded picks its line by line_ref and reconciliation key."""
    job_id, message = _stored_with_a_repeated_line_no(ctx, vendor)
    settle_chunk(ctx, message, 1)
    _assert_counts_add_up(ctx, job_id)
    for _ in range(3):
        [letter] = [d for d in dead_letters(ctx.engine, job_id) if d.status == "dead"]
        assert (letter.reason, letter.line_ref, letter.lines) == ("unknown_promo_tier", "1", 1)
        if stored == "before_line_index":
            with ctx.engine.begin() as conn:
                conn.execute(
                    tables.dead_letters.update()
                    .where(tables.dead_letters.c.id == letter.id)
                    .values(line_index=None)
                )
        assert settle_chunk(ctx, requeue(ctx, letter.id), 1) is not None
        _assert_counts_add_up(ctx, job_id)
    [row] = ledger_rows(ctx.engine, job_id)
    assert row.line_ref == "1" and row.amount == 1
