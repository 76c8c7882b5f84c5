"""The settle stage against real Redis and each ledger backend
(docs/architecture.md#exactly-once-effect, docs/architecture.md#the-settlement-transaction).

Each test delivers chunk messages to the stage the way Dramatiq would, and
checks the ledger: at most one row per (reconciliation_key, contract_version).
Every test runs on PostgreSQL and on the embedded SQLite ledger.
"""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
import redis

from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.jobs.intake import discard_unaccepted, mark_accepted
from shared.adapters.db.jobs.queries import job_status
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoDocument
from shared.domain.pipeline.leasing import document_lease
from shared.errors import TransientError
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.ledger import chunk_results, dead_letters, identity_counts, ledger_rows

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def vendor(ctx: WorkerContext) -> str:
    name = uid("V-")
    publish_promo_contracts(ctx.engine, [name])
    return name


def keys_of(documents: list[dict]) -> list[str]:
    kind = get_kind("promo_accrual")
    return [
        line.reconciliation_key
        for d in documents
        for line in kind.lines(PromoDocument.model_validate(d))
    ]


def three_line_docs(vendor: str) -> list[dict]:
    # T1 rate 0.125: 8 units -> 1.00 (posted), 40 -> 5.00 claimed 6.00 (disputed)
    return [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "40", "6.00")]),
        promo_doc(vendor, [promo_line(1, "16", "2.00")]),
    ]


def test_settled_chunk_posts_each_line_once_and_counts_add_up(ctx, vendor):
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    outcome = settle_chunk(ctx, message, 1)
    assert outcome is not None
    assert (outcome.posted, outcome.disputed, outcome.duplicate, outcome.dead_lettered) == (
        2,
        1,
        0,
        0,
    )
    rows = ledger_rows(ctx.engine, job_id)
    assert sorted(r.amount for r in rows) == [Decimal("1.00"), Decimal("2.00"), Decimal("5.00")]
    assert all(r.delta == r.amount and r.supersedes_id is None for r in rows)
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.state == "completed"
    assert status.amounts == {
        "posted": Decimal("3.00"),
        "disputed": Decimal("6.00"),
        "disputed_model": Decimal("5.00"),
    }
    assert sum(status.outcomes.values()) == status.lines == 3


def test_redelivered_chunk_posts_nothing_twice(ctx, vendor):
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    assert settle_chunk(ctx, message, 1) is not None
    before = (ledger_rows(ctx.engine, job_id), chunk_results(ctx.engine, job_id))
    assert settle_chunk(ctx, message, 2) is None  # the chunk's marker stops it
    assert (ledger_rows(ctx.engine, job_id), chunk_results(ctx.engine, job_id)) == before


def test_redis_flushed_between_deliveries_still_one_row_per_key(ctx, vendor, redis_client):
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    assert settle_chunk(ctx, message, 1) is not None
    redis_client.flushdb()
    assert settle_chunk(ctx, message, 2) is None
    # The producer sends the same lines again after Redis lost every key.
    redis_client.flushdb()
    again_id, [again] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    outcome = settle_chunk(ctx, again, 1)
    assert outcome is not None and outcome.duplicate == 3 and outcome.posted == 0
    counts = identity_counts(ctx.engine, keys_of(docs))
    assert len(counts) == 3 and set(counts.values()) == {1}
    assert ledger_rows(ctx.engine, again_id) == []


def test_concurrent_deliveries_of_one_chunk_settle_once(ctx, vendor):
    docs = [promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 201)])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    results: list[object] = []

    def deliver() -> None:
        for attempt in range(1, 50):
            try:
                results.append(settle_chunk(ctx, message, attempt))
                return
            except TransientError as exc:  # the other delivery holds the leases
                assert exc.reason == "claim_contended"
                threading.Event().wait(0.05)

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2 and sum(r is None for r in results) == 1
    assert len(ledger_rows(ctx.engine, job_id)) == 200
    assert len(chunk_results(ctx.engine, job_id)) == 1


def test_a_document_leased_by_another_live_worker_is_retried_not_dropped(ctx, vendor, redis_client):
    # A promo line's key starts with its document's partition and id: the attempt
    # leases the document once (shared/domain/pipeline/leasing.py), and another attempt
    # at any of its lines needs that same lease.
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00")])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    lease = document_lease(vendor, docs[0]["document_id"])
    lease_key = ctx.claims.key("promo_accrual", lease, 1)
    redis_client.set(lease_key, "another-workers-token", px=60_000)
    with pytest.raises(TransientError) as err:
        settle_chunk(ctx, message, 1)
    assert err.value.reason == "claim_contended"
    assert chunk_results(ctx.engine, job_id) == []  # not marked: it will be retried
    redis_client.delete(lease_key)  # that worker died; its lease is gone
    outcome = settle_chunk(ctx, message, 2)
    assert outcome is not None and outcome.posted == 2
    assert ctx.claims.live_leases([lease_key]) == []  # finished: free for the next claim
    # One lease for the document's two lines; none of a line's own key.
    assert not redis_client.exists(*(ctx.claims.key("promo_accrual", k, 1) for k in keys_of(docs)))


def test_business_errors_dead_letter_their_lines_with_reasons(ctx, vendor):
    docs = [
        promo_doc(
            vendor,
            [
                promo_line(1, "8", "1.00"),
                promo_line(2, "8", "1.00", tier="T9"),
                promo_line(3, "-1", "1.00"),
            ],
        ),
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00")], version=99),
    ]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    outcome = settle_chunk(ctx, message, 1)
    assert outcome is not None
    assert (outcome.posted, outcome.dead_lettered) == (1, 4)
    letters = {(d.line_ref, d.reason, d.lines) for d in dead_letters(ctx.engine, job_id)}
    assert letters == {
        ("2", "unknown_promo_tier", 1),
        ("3", "negative_quantity", 1),
        (None, "unknown_contract_version", 2),
    }
    status = job_status(ctx.engine, job_id)
    assert status is not None and sum(status.outcomes.values()) == status.lines == 5


def test_tampered_message_is_dead_lettered_not_settled(ctx, vendor):
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    tampered = {**message, "kind": "freight_audit"}
    assert settle_chunk(ctx, tampered, 1) is None
    assert ledger_rows(ctx.engine, job_id) == []
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.lines, letter.error_class) == (
        "signature_mismatch",
        3,
        "StructuralError",
    )


def test_newer_contract_version_posts_a_delta_row(ctx, vendor):
    line = promo_line(1, "8", "1.00", sku=uid("SKU-"))
    doc_id = uid("INV-")
    first_id, [first] = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor, [line], 1, doc_id)]
    )
    settle_chunk(ctx, first, 1)
    # Version 2 pays T1 at 0.45: 8 * 0.45 = 3.60, delta 3.60 - 1.00 = 2.60.
    from shared.adapters.db.contracts import put_contract

    put_contract(
        ctx.engine, "promo_accrual", vendor, 2, {"tier_rates": {"T1": "0.45"}, "tolerance": "0.05"}
    )
    second_id, [second] = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor, [line], 2, doc_id)]
    )
    outcome = settle_chunk(ctx, second, 1)
    assert outcome is not None and outcome.disputed == 1  # claimed 1.00 vs 3.60
    [old] = ledger_rows(ctx.engine, first_id)
    [new] = ledger_rows(ctx.engine, second_id)
    assert new.reconciliation_key == old.reconciliation_key
    assert (new.amount, new.delta, new.supersedes_id) == (Decimal("3.60"), Decimal("2.60"), old.id)
    assert old.delta + new.delta == new.amount


def test_redis_down_is_transient(ctx, vendor):
    docs = three_line_docs(vendor)
    _, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    real = ctx.claims
    from shared.adapters.leases import ClaimStore

    ctx.claims = ClaimStore(
        redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=1), "x", 1000
    )
    try:
        with pytest.raises(redis.ConnectionError):
            settle_chunk(ctx, message, 1)
    finally:
        ctx.claims = real
    assert settle_chunk(ctx, message, 2) is not None


def test_chunk_of_a_job_still_being_enqueued_waits_then_is_dropped_if_never_accepted(ctx, vendor):
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, accept=False)
    with pytest.raises(TransientError) as err:
        settle_chunk(ctx, message, 1)
    assert err.value.reason == "job_not_ready"
    patient = ctx.settings
    ctx.settings = patient.model_copy(update={"receiving_timeout_s": 0})
    try:
        assert settle_chunk(ctx, message, 2) is None  # no 202 was given: nothing to settle
    finally:
        ctx.settings = patient
    assert ledger_rows(ctx.engine, job_id) == [] and chunk_results(ctx.engine, job_id) == []


def test_chunk_seen_just_before_its_job_is_accepted_settles_without_a_retry(ctx, vendor):
    """The front door marks a job accepted right after the broker confirms its
    chunks; a worker that is faster waits for it instead of taking a retry."""
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, accept=False)
    accept = threading.Timer(0.2, mark_accepted, (ctx.engine, job_id))
    accept.start()
    try:
        outcome = settle_chunk(ctx, message, 1)
    finally:
        accept.join()
    assert outcome is not None and outcome.posted == 2


def test_chunk_of_a_job_withdrawn_while_the_worker_waits_is_dropped(ctx, vendor):
    """A submission whose enqueueing failed is withdrawn (503, no 202): a worker
    waiting for its accept must not take "gone" for "accepted"."""
    docs = three_line_docs(vendor)
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, accept=False)
    withdraw = threading.Timer(0.2, discard_unaccepted, (ctx.engine, job_id))
    withdraw.start()
    try:
        assert settle_chunk(ctx, message, 1) is None
    finally:
        withdraw.join()
    assert ledger_rows(ctx.engine, job_id) == [] and chunk_results(ctx.engine, job_id) == []


def test_identifiers_with_backslashes_and_unicode_reach_the_ledger_intact(ctx, vendor):
    doc_id = uid("INV\\2026\\Q3-é-")
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00", sku="SKU\\N")], document_id=doc_id)]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    assert settle_chunk(ctx, message, 1) is not None
    [row] = ledger_rows(ctx.engine, job_id)
    assert row.document_id == doc_id and row.partition_key == vendor
