"""The dispute queue on each ledger backend (docs/architecture.md#exactly-once-resolution):
each resolution appends one ``resolved`` row beside its untouched disputed
row, its decision, its event and its audit entry; statuses are derived; the
database itself refuses a second resolution."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from shared.adapters.db import outbox, tables
from shared.adapters.db.disputes import queue as disputes
from shared.adapters.db.jobs.lines import list_lines
from shared.domain.disputes import (
    DecidedAmountOutOfRange,
    DisputeAlreadyResolved,
    DisputeSuperseded,
    ResolveRequest,
)
from shared.domain.pipeline.events import event_id
from tests.support.disputes import (
    ACTOR,
    counts_for,
    delta_sums,
    disputed_doc,
    job_disputes,
    new_vendor,
    resolutions_of,
    row,
    settle,
)

pytestmark = pytest.mark.both_backends

ledger = tables.ledger_entries


@pytest.mark.parametrize(
    ("request_", "decided"),
    [
        (ResolveRequest("accept_claim", "vendor proved it"), Decimal("1.50")),
        (ResolveRequest("accept_model", "contract says so"), Decimal("1.00")),
        (ResolveRequest("settle_at", "met halfway", Decimal("1.25")), Decimal("1.25")),
    ],
)
def test_each_decision_appends_one_resolved_row_and_leaves_the_disputed_row(
    engine: Engine, request_: ResolveRequest, decided: Decimal
) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50"])]
    [dispute_id] = job_disputes(engine, settle(engine, docs), docs)
    before = row(engine, dispute_id)

    result = disputes.resolve(engine, dispute_id, request_, ACTOR)

    assert result.created
    assert result.dispute.status == "resolved"
    resolution = result.dispute.resolution
    assert resolution is not None
    assert (resolution.decision, resolution.amount, resolution.note) == (
        request_.decision,
        decided,
        request_.note,
    )
    assert resolution.resolved_by == ACTOR
    [resolved] = resolutions_of(engine, dispute_id)
    assert resolution.ledger_entry_id == resolved.id
    # The resolved row: the disputed row's identity, job and claim; the amount
    # decided; its change from the disputed amount; the row it supersedes.
    same = ("reconciliation_key", "contract_version", "kind", "partition_key", "document_id")
    for name in (*same, "line_ref", "job_id", "claimed_amount", "correlation_id"):
        assert getattr(resolved, name) == getattr(before, name), name
    assert (resolved.outcome, resolved.amount) == ("resolved", decided)
    assert resolved.delta == decided - Decimal("1.00")
    assert resolved.supersedes_id == dispute_id
    # The disputed row never changes.
    assert tuple(row(engine, dispute_id)) == tuple(before)
    assert counts_for(engine, dispute_id) == (1, 1, 1, 1)
    audit = tables.audit_log
    with engine.connect() as conn:
        entry = conn.execute(
            select(audit).where(
                audit.c.action == "dispute_resolve", audit.c.target == str(dispute_id)
            )
        ).one()
    assert entry.actor == ACTOR
    details = json.loads(entry.details)
    assert details["decision"] == request_.decision
    assert Decimal(details["amount"]) == decided
    assert disputes.get(engine, dispute_id) == result.dispute
    # The resolved row is no dispute of its own.
    assert disputes.get(engine, resolved.id) is None
    assert disputes.statuses(engine, [dispute_id, resolved.id]) == {dispute_id: "resolved"}


def test_the_same_request_again_answers_the_same_resolution_and_another_conflicts(
    engine: Engine,
) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50"])]
    [dispute_id] = job_disputes(engine, settle(engine, docs), docs)
    first = disputes.resolve(
        engine, dispute_id, ResolveRequest("settle_at", "a", Decimal("1.2")), ACTOR
    )
    # The note does not decide it: a retry may carry a reworded note.
    again = disputes.resolve(
        engine, dispute_id, ResolveRequest("settle_at", "b", Decimal("1.2000")), "operator:other"
    )
    assert (first.created, again.created) == (True, False)
    assert again.dispute == first.dispute
    for different in (
        ResolveRequest("settle_at", "a", Decimal("1.21")),
        ResolveRequest("accept_claim", "a"),
    ):
        with pytest.raises(DisputeAlreadyResolved) as raised:
            disputes.resolve(engine, dispute_id, different, ACTOR)
        assert raised.value.code == "dispute_already_resolved"
    assert counts_for(engine, dispute_id) == (1, 1, 1, 1)


def test_unknown_ids_and_amounts_the_ledger_cannot_hold_are_refused(engine: Engine) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "1.00"])]
    job_id = settle(engine, docs)
    [dispute_id] = job_disputes(engine, job_id, docs)
    posted = [r.id for r in list_lines(engine, job_id, outcome="posted", after=None, limit=5)]
    for unknown in (10**12, posted[0]):  # a posted row is no dispute
        with pytest.raises(LookupError):
            disputes.resolve(engine, unknown, ResolveRequest("accept_claim", "n"), ACTOR)
        assert disputes.get(engine, unknown) is None
    for amount in ("1.00001", "10000000000000000", "-9999999999999999.5"):
        with pytest.raises(DecidedAmountOutOfRange) as raised:
            disputes.resolve(
                engine, dispute_id, ResolveRequest("settle_at", "n", Decimal(amount)), ACTOR
            )
        assert raised.value.code == "amount_out_of_range"
    assert disputes.get(engine, dispute_id).status == "open"  # type: ignore[union-attr]
    assert counts_for(engine, dispute_id) == (0, 0, 0, 0)


def test_a_newer_version_supersedes_an_open_dispute_which_then_cannot_be_resolved(
    engine: Engine,
) -> None:
    vendor = new_vendor(engine)
    doc = disputed_doc(vendor, ["1.50", "1.60"])
    [first, second] = job_disputes(engine, settle(engine, [doc]), [doc])
    disputes.resolve(engine, first, ResolveRequest("accept_model", "n"), ACTOR)
    # Version 2 pays 2.00 for both lines: the claims are still disputed.
    v2_doc = disputed_doc(vendor, ["1.50", "1.60"], 2, doc["document_id"])
    newer = settle(engine, [v2_doc])
    assert disputes.get(engine, first).status == "resolved"  # type: ignore[union-attr]
    assert disputes.get(engine, second).status == "superseded"  # type: ignore[union-attr]
    with pytest.raises(DisputeSuperseded) as raised:
        disputes.resolve(engine, second, ResolveRequest("accept_model", "n"), ACTOR)
    assert raised.value.code == "dispute_superseded"
    assert counts_for(engine, second) == (0, 0, 0, 0)
    # The newer version's rows are disputes of their own, open, and measured
    # from what the identity amounted to: the resolution, or the disputed row.
    v2_first, v2_second = job_disputes(engine, newer, [v2_doc])
    assert disputes.statuses(engine, [first, second, v2_first, v2_second]) == {
        first: "resolved",
        second: "superseded",
        v2_first: "open",
        v2_second: "open",
    }
    [resolved] = resolutions_of(engine, first)
    assert row(engine, v2_first).supersedes_id == resolved.id
    assert row(engine, v2_second).supersedes_id == second
    keys = {row(engine, i).reconciliation_key for i in (first, second)}
    assert all(total == latest for total, latest in delta_sums(engine, keys).values())


def test_every_identity_of_a_job_adds_up_to_its_amount_now(engine: Engine) -> None:
    """Resolved, superseded, re-resolved and re-priced identities over a whole
    job: for each, the sum of delta over its rows is its latest row's amount."""
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "1.00", "0.70", "2.10"]) for _ in range(6)]
    ids = job_disputes(engine, settle(engine, docs), docs)
    assert len(ids) == 18
    for n, dispute_id in enumerate(ids[:9]):
        decision = ("accept_claim", "accept_model", "settle_at")[n % 3]
        amount = Decimal("0.9") if decision == "settle_at" else None
        disputes.resolve(engine, dispute_id, ResolveRequest(decision, "n", amount), ACTOR)
    # Version 2 of half the documents: some of their disputes were resolved,
    # the others are superseded now; then version 3 of one of them, after its
    # version-2 disputes are resolved too.
    v2_docs = [
        disputed_doc(vendor, ["1.50", "1.00", "0.70", "2.10"], 2, d["document_id"])
        for d in docs[::2]
    ]
    v2 = settle(engine, v2_docs)
    for dispute_id in job_disputes(engine, v2, v2_docs)[:3]:
        disputes.resolve(engine, dispute_id, ResolveRequest("accept_claim", "n"), ACTOR)
    settle(
        engine, [disputed_doc(vendor, ["4.00", "1.00", "0.70", "2.10"], 3, docs[0]["document_id"])]
    )
    keys = {r.reconciliation_key for r in (row(engine, i) for i in ids)}
    sums = delta_sums(engine, keys)
    assert len(sums) == 24 - 6  # every line of the job (the posted ones too)
    assert {key: total for key, (total, _) in sums.items()} == {
        key: latest for key, (_, latest) in sums.items()
    }
    statuses = disputes.statuses(engine, ids)
    assert sorted(statuses.values()).count("superseded") == 3


def test_the_database_refuses_a_second_resolution_of_one_dispute(engine: Engine) -> None:
    """The partial unique index, not only the code: a second ``resolved`` row
    for a dispute written directly, past ``resolve``, is an IntegrityError."""
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50"])]
    [dispute_id] = job_disputes(engine, settle(engine, docs), docs)
    disputes.resolve(engine, dispute_id, ResolveRequest("accept_claim", "n"), ACTOR)
    [resolved] = resolutions_of(engine, dispute_id)
    copy = {c.name: getattr(resolved, c.name) for c in ledger.c if c.name != "id"}
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(ledger.insert().values(**{**copy, "amount": Decimal("1.00")}))
    # ... while a resolved row beside its disputed row's identity is allowed, a
    # second posted or disputed row of the identity is not.
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(ledger.insert().values(**{**copy, "outcome": "posted", "supersedes_id": None}))
    assert counts_for(engine, dispute_id) == (1, 1, 1, 1)


def test_reads_list_filter_count_and_stream_the_queue(engine: Engine) -> None:
    vendor = new_vendor(engine)
    other = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "0.10", "1.06", "3.00"]), disputed_doc(other, ["2.00"])]
    job_id = settle(engine, docs)
    ids = job_disputes(engine, job_id, docs)
    assert len(ids) == 5
    disputes.resolve(engine, ids[3], ResolveRequest("accept_model", "n"), ACTOR)
    mine = disputes.Filter(job_id=job_id)
    still_open = sorted([ids[0], ids[1], ids[2], ids[4]])  # oldest first: by id
    assert [x.id for x in disputes.page(engine, mine, after_id=None, limit=10)] == still_open
    first = disputes.page(engine, mine, after_id=None, limit=2)
    rest = disputes.page(engine, mine, after_id=first[-1].id, limit=10)
    assert [x.id for x in first + rest] == still_open
    assert [x.id for x in disputes.stream(engine, mine)] == still_open
    every = disputes.Filter(status="all", job_id=job_id)
    assert [x.id for x in disputes.stream(engine, every)] == sorted(ids)
    resolved = disputes.Filter(status="resolved", job_id=job_id)
    assert [x.id for x in disputes.page(engine, resolved, after_id=None, limit=10)] == [ids[3]]
    by_partition = disputes.Filter(job_id=job_id, partition_key=other)
    [theirs] = disputes.page(engine, by_partition, after_id=None, limit=10)
    assert (theirs.id, theirs.claimed_amount, theirs.model_amount) == (
        ids[4],
        Decimal("2.00"),
        Decimal("1.00"),
    )
    assert theirs.variance == Decimal("1.00")
    # Variances 0.50, -0.90, 0.06, (resolved), 1.00: compared exactly, at the edges too.
    small = disputes.Filter(job_id=job_id, max_abs_variance=Decimal("0.5"))
    found = disputes.page(engine, small, after_id=None, limit=10)
    assert [x.id for x in found] == sorted([ids[0], ids[2]])
    large = disputes.Filter(job_id=job_id, min_abs_variance=Decimal("0.90"))
    found = disputes.page(engine, large, after_id=None, limit=10)
    assert [x.id for x in found] == sorted([ids[1], ids[4]])
    opened = disputes.get(engine, ids[0])
    assert opened is not None and opened.opened_at.tzinfo is not None
    # opened_before compares instants, whatever the zone it is given in.
    ahead = dt.timezone(dt.timedelta(hours=5))
    for before, expected in (
        (opened.opened_at - dt.timedelta(days=1), []),
        (opened.opened_at.astimezone(ahead), []),
        ((opened.opened_at + dt.timedelta(seconds=1)).astimezone(ahead), still_open),
    ):
        where = disputes.Filter(job_id=job_id, opened_before=before)
        assert [x.id for x in disputes.page(engine, where, after_id=None, limit=10)] == expected
    assert opened.resolution is None and opened.kind == "promo_accrual"

    stats = disputes.stats(engine)
    open_totals = {(t.status, t.kind): t for t in stats.totals}
    assert open_totals[("open", "promo_accrual")].count >= 4
    # The ten partitions with the largest open abs variance, in the whole ledger:
    # on the shared PostgreSQL database other tests' partitions may outrank ours.
    ranked = [p.open_abs_variance for p in stats.top_partitions]
    assert ranked == sorted(ranked, reverse=True) and len(ranked) <= 10
    top = {(p.kind, p.partition_key): p for p in stats.top_partitions}
    expected = {
        vendor: (3, Decimal("-0.34"), Decimal("1.46")),
        other: (1, Decimal("1.00"), Decimal("1.00")),
    }
    for partition, (n, signed, at_stake) in expected.items():
        mine_ranked = top.get(("promo_accrual", partition))
        if mine_ranked is None:  # only when ten others outrank it
            assert len(ranked) == 10 and ranked[-1] >= at_stake, partition
        else:
            got = (mine_ranked.open_count, mine_ranked.open_variance, mine_ranked.open_abs_variance)
            assert got == (n, signed, at_stake)
    assert stats.oldest_open_at is not None
    # This job's four open disputes are in the open totals (the /metrics gauges'
    # source, tests/integration/test_dispute_metrics.py): 1.46 + 1.00 at stake.
    assert open_totals[("open", "promo_accrual")].abs_variance >= Decimal("2.46")


def test_a_jobs_lines_never_list_resolutions(engine: Engine) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "1.00", "1.70"])]
    job_id = settle(engine, docs)
    before = list_lines(engine, job_id, outcome=None, after=None, limit=100)
    for dispute_id in job_disputes(engine, job_id, docs):
        disputes.resolve(engine, dispute_id, ResolveRequest("accept_claim", "n"), ACTOR)
    after = list_lines(engine, job_id, outcome=None, after=None, limit=100)
    assert [(r.id, r.outcome) for r in after] == [(r.id, r.outcome) for r in before]
    assert sorted(r.outcome for r in after) == ["disputed", "disputed", "posted"]
    listed = list_lines(engine, job_id, outcome="disputed", after=None, limit=100)
    assert [r.id for r in listed] == [r.id for r in before if r.outcome == "disputed"]


def test_bulk_resolves_open_disputes_oldest_first_up_to_the_limit(engine: Engine) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "1.20", "0.90", "1.30", "5.00"])]
    job_id = settle(engine, docs)
    ids = job_disputes(engine, job_id, docs)
    disputes.resolve(engine, ids[1], ResolveRequest("accept_model", "n"), ACTOR)
    small = disputes.Filter(job_id=job_id, max_abs_variance=Decimal("0.50"))
    request = ResolveRequest("accept_claim", "write-off under 0.50")
    # Open and within 0.50: lines 1 (0.50), 3 (0.10), 4 (0.30); the limit takes the oldest two.
    within = sorted([ids[0], ids[2], ids[3]])
    assert disputes.resolve_bulk(engine, small, request, 2, ACTOR) == 2
    status = {i: disputes.get(engine, i).status for i in ids}  # type: ignore[union-attr]
    assert [status[i] for i in within] == ["resolved", "resolved", "open"]
    assert (status[ids[1]], status[ids[4]]) == ("resolved", "open")
    assert disputes.resolve_bulk(engine, small, request, 10, ACTOR) == 1
    assert disputes.resolve_bulk(engine, small, request, 10, ACTOR) == 0
    for dispute_id in (ids[0], ids[2], ids[3]):
        assert counts_for(engine, dispute_id) == (1, 1, 1, 1)
        [resolved] = resolutions_of(engine, dispute_id)
        original = row(engine, dispute_id)
        assert resolved.amount == original.claimed_amount
        assert resolved.delta == original.claimed_amount - original.amount
        got = disputes.get(engine, dispute_id)
        assert got is not None and got.resolution is not None
        assert (got.resolution.decision, got.resolution.note) == ("accept_claim", request.note)
    with pytest.raises(ValueError):
        disputes.resolve_bulk(engine, small, ResolveRequest("settle_at", "n", Decimal(1)), 1, ACTOR)
    for limit in (0, 10_001):
        with pytest.raises(ValueError):
            disputes.resolve_bulk(engine, small, request, limit, ACTOR)


def test_a_resolution_is_published_as_its_own_event(engine: Engine) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50"])]
    [dispute_id] = job_disputes(engine, settle(engine, docs), docs)
    while True:  # the events before it (this and other tests' settlements) are published
        with engine.begin() as conn:
            published = outbox.next_batch(conn, 1000, 1000).outbox_ids
            outbox.mark_published(conn, published)
        if not published:
            break
    result = disputes.resolve(
        engine, dispute_id, ResolveRequest("settle_at", "split\tit", Decimal("1.3")), ACTOR
    )
    with engine.begin() as conn:
        batch = outbox.next_batch(conn, 1000, 1000)
    [message] = batch.messages  # its own unit: a message of one event
    disputed = row(engine, dispute_id)
    assert message.routing_key == "settlement.resolved.promo_accrual"
    eid = event_id(disputed.reconciliation_key, disputed.contract_version, "resolved")
    assert eid != event_id(disputed.reconciliation_key, disputed.contract_version)
    assert message.event_ids == (eid,) and message.count == 1
    [event] = json.loads(message.body)["events"]
    assert event["event_id"] == eid
    assert event["type"] == "settlement.resolved"
    assert (event["decision"], event["note"], event["supersedes_id"]) == (
        "settle_at",
        "split\tit",
        dispute_id,
    )
    amounts = [Decimal(event[name]) for name in ("amount", "delta", "claimed_amount")]
    assert amounts == [Decimal("1.3"), Decimal("0.3"), Decimal("1.5")]
    assert event["reconciliation_key"] == disputed.reconciliation_key
    assert event["contract_version"] == disputed.contract_version
    assert result.dispute.resolution is not None
    assert batch.units[0].job_ids == {disputed.job_id}
