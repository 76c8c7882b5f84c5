"""shared.domain.pipeline.settlement: pure planning of a chunk
(docs/architecture.md#compute-heavy-settle,
docs/architecture.md#settlement-kinds, docs/architecture.md#failures-and-reason-codes reason
scopes)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from shared.domain.kinds.promo_accrual import PromoAccrual, PromoContract, PromoDocument
from shared.domain.pipeline.settlement import (
    ChunkPlan,
    DocumentFailure,
    PlannedLine,
    plan_chunk,
    plan_failure,
)
from shared.domain.pipeline.units import chunk_start
from shared.domain.requeue.lines import restrict_to_line

KIND = PromoAccrual()
CONTRACT = PromoContract.model_validate(
    {"tier_rates": {"T1": "0.125", "T2": "0.45"}, "tolerance": "0.05"}
)


def _line(
    line_no: int, tier: str = "T2", units: str = "37", claimed: str = "16.65"
) -> dict[str, Any]:
    return {
        "line_no": line_no,
        "sku": f"SKU-{line_no}",
        "promo_tier": tier,
        "qualifying_units": units,
        "claimed_amount": claimed,
    }


def _doc(
    document_id: str, *lines: dict[str, Any], version: int = 7, partition: str = "VENDOR-1"
) -> PromoDocument:
    return PromoDocument.model_validate(
        {
            "document_id": document_id,
            "partition_key": partition,
            "contract_version": version,
            "period": "2026-Q3",
            "lines": list(lines) or [_line(1)],
        }
    )


CONTRACTS = {("VENDOR-1", 7): CONTRACT}


def test_every_line_of_a_document_with_a_known_contract_settles() -> None:
    doc = _doc("D1", _line(1), _line(2, claimed="20.00"))
    plan = plan_chunk(KIND, [doc], CONTRACTS)

    assert plan.failed_documents == []
    assert [p.line.line_ref for p in plan.lines] == ["1", "2"]
    first, second = plan.lines
    assert isinstance(first, PlannedLine)
    assert first.document is doc
    assert first.reason is None
    assert first.settlement is not None and first.settlement.outcome == "posted"
    # 37 * 0.45 = 16.65; claimed 20.00 differs by 3.35 > 0.05 -> disputed.
    assert second.settlement is not None and second.settlement.outcome == "disputed"
    assert second.settlement.amount == Decimal("16.65")
    assert second.settlement.claimed_amount == Decimal("20.00")


def test_unknown_contract_version_fails_the_whole_document() -> None:
    doc = _doc("D1", _line(1), _line(2), _line(3), version=8)
    plan = plan_chunk(KIND, [doc], CONTRACTS)

    assert plan.lines == []
    [failure] = plan.failed_documents
    assert isinstance(failure, DocumentFailure)
    assert failure.reason == "unknown_contract_version"
    assert failure.error_class == "BusinessError"
    assert failure.document is doc
    assert [line.line_ref for line in failure.lines] == ["1", "2", "3"]
    assert failure.lines == KIND.lines(doc)
    assert "VENDOR-1" in failure.message and "8" in failure.message


def test_contract_is_looked_up_by_partition_and_pinned_version_never_latest() -> None:
    newer = PromoContract.model_validate({"tier_rates": {"T2": "1.00"}, "tolerance": "0"})
    contracts = {("VENDOR-1", 7): CONTRACT, ("VENDOR-1", 8): newer}
    plan = plan_chunk(KIND, [_doc("D1", version=7)], contracts)
    # Version 7: 37 * 0.45 = 16.65 (version 8 would give 37.00).
    assert plan.lines[0].settlement is not None
    assert plan.lines[0].settlement.amount == Decimal("16.65")


def test_contract_of_another_partition_is_not_used() -> None:
    plan = plan_chunk(KIND, [_doc("D1", partition="VENDOR-2")], CONTRACTS)
    assert plan.lines == []
    assert [f.reason for f in plan.failed_documents] == ["unknown_contract_version"]


def test_line_level_business_error_dead_letters_only_that_line() -> None:
    doc = _doc("D1", _line(1), _line(2, tier="T9"), _line(3, units="-1"), _line(4))
    plan = plan_chunk(KIND, [doc], CONTRACTS)

    assert plan.failed_documents == []
    by_ref = {p.line.line_ref: p for p in plan.lines}
    assert set(by_ref) == {"1", "2", "3", "4"}
    assert by_ref["2"].settlement is None
    assert by_ref["2"].reason == "unknown_promo_tier"
    assert by_ref["3"].settlement is None
    assert by_ref["3"].reason == "negative_quantity"
    assert by_ref["2"].message and by_ref["3"].message
    assert by_ref["1"].settlement is not None and by_ref["1"].reason is None
    assert by_ref["4"].settlement is not None and by_ref["4"].reason is None


def test_one_failing_document_does_not_affect_the_others_in_the_chunk() -> None:
    good = _doc("D1", _line(1))
    bad = _doc("D2", _line(1), _line(2), version=99)
    also_good = _doc("D3", _line(1, tier="T1", units="3", claimed="0.38"))
    plan = plan_chunk(KIND, [good, bad, also_good], CONTRACTS)

    assert [f.document.document_id for f in plan.failed_documents] == ["D2"]
    assert [(p.document.document_id, p.line.line_ref) for p in plan.lines] == [
        ("D1", "1"),
        ("D3", "1"),
    ]
    # 3 * 0.125 = 0.375 -> 0.38.
    assert plan.lines[1].settlement is not None
    assert plan.lines[1].settlement.amount == Decimal("0.38")


def test_claim_keys_are_sorted_unique_and_skip_dead_lettered_lines() -> None:
    doc1 = _doc("D1", _line(1), _line(2), _line(3, tier="T9"))
    doc1_again = _doc("D1", _line(1))  # same identity sent twice in one chunk
    doc2 = _doc("D2", _line(1))
    plan = plan_chunk(KIND, [doc2, doc1, doc1_again], CONTRACTS)

    keys = plan.claim_keys()
    d1_line1, d1_line2, _dead = KIND.lines(doc1)
    [d2_line1] = KIND.lines(doc2)
    expected = sorted(
        [
            (d1_line1.reconciliation_key, 7),
            (d1_line2.reconciliation_key, 7),
            (d2_line1.reconciliation_key, 7),
        ]
    )
    assert keys == expected
    assert keys == sorted(keys)
    assert len(keys) == len(set(keys)) == 3
    dead_key = next(p.line.reconciliation_key for p in plan.lines if p.settlement is None)
    assert all(key != dead_key for key, _ in keys)
    assert all(version == 7 for _, version in keys)


def test_claim_keys_of_failed_documents_are_not_claimed() -> None:
    plan = plan_chunk(KIND, [_doc("D1", version=99)], CONTRACTS)
    assert plan.claim_keys() == []


def test_empty_chunk_plans_nothing() -> None:
    plan = plan_chunk(KIND, [], CONTRACTS)
    assert plan.lines == [] and plan.failed_documents == [] and plan.claim_keys() == []


def test_plan_failure_dead_letters_every_line_of_every_document() -> None:
    docs = [_doc("D1", _line(1), _line(2)), _doc("D2", _line(1))]
    plan = plan_failure(KIND, docs, "retries_exhausted", "TransientError", "gave up")

    assert isinstance(plan, ChunkPlan)
    assert plan.lines == []
    assert plan.claim_keys() == []
    assert [f.document.document_id for f in plan.failed_documents] == ["D1", "D2"]
    assert [len(f.lines) for f in plan.failed_documents] == [2, 1]
    for failure in plan.failed_documents:
        assert failure.reason == "retries_exhausted"
        assert failure.error_class == "TransientError"
        assert failure.message == "gave up"


def test_dead_lettered_line_count_adds_up() -> None:
    # lines = settled + line-level dead letters + lines of failed documents
    # (docs/architecture.md#job-status-arithmetic counters).
    docs = [_doc("D1", _line(1), _line(2, tier="X")), _doc("D2", _line(1), _line(2), version=3)]
    plan = plan_chunk(KIND, docs, CONTRACTS)
    total = sum(KIND.line_count(d) for d in docs)
    settled = sum(1 for p in plan.lines if p.settlement is not None)
    line_dead = sum(1 for p in plan.lines if p.settlement is None)
    doc_dead = sum(len(f.lines) for f in plan.failed_documents)
    assert (total, settled, line_dead, doc_dead) == (4, 1, 1, 2)


def test_same_identity_under_two_contract_versions_claims_both_pairs() -> None:
    newer = PromoContract.model_validate({"tier_rates": {"T2": "0.50"}, "tolerance": "0.05"})
    contracts = {("VENDOR-1", 7): CONTRACT, ("VENDOR-1", 8): newer}
    plan = plan_chunk(KIND, [_doc("D1", version=8), _doc("D1", version=7)], contracts)
    [line] = KIND.lines(_doc("D1"))
    assert plan.claim_keys() == [(line.reconciliation_key, 7), (line.reconciliation_key, 8)]


def _repeated_line_no() -> PromoDocument:
    """Line 1 twice (the front door refuses it now; a stored chunk may hold it):
    the first settles, the second has an unknown tier."""
    doc = _doc("INV-R", _line(1), _line(2, tier="T9"))
    second = doc.lines[1].model_copy(update={"line_no": 1})
    return doc.model_copy(update={"lines": [doc.lines[0], second]})


@pytest.mark.regression
def test_a_requeued_line_is_that_one_line_even_when_its_line_no_repeats() -> None:
    plan = plan_chunk(KIND, [_repeated_line_no()], CONTRACTS)
    assert [(p.line.line_ref, p.reason, p.index) for p in plan.lines] == [
        ("1", None, 0),
        ("1", "unknown_promo_tier", 1),
    ]
    [only] = restrict_to_line(plan, "1", 1).lines
    assert only is plan.lines[1]
    # Stored before positions were: picked by line_ref and reconciliation key.
    key = plan.lines[1].line.reconciliation_key
    [by_key] = restrict_to_line(plan, "1", None, key).lines
    assert by_key is plan.lines[1]
    # Never more than one line, and never a line the position does not name.
    assert len(restrict_to_line(plan, "1").lines) == 1
    assert restrict_to_line(plan, "2", 1).lines == []


@pytest.mark.regression
def test_a_requeued_line_failing_at_document_level_stays_one_line() -> None:
    plan = plan_failure(KIND, [_repeated_line_no()], "retries_exhausted", "TransientError", "x")
    [failure] = restrict_to_line(plan, "1", 1).failed_documents
    assert (failure.covered, failure.line_ref, failure.line_index) == (1, "1", 1)
    assert failure.lines == [plan.failed_documents[0].lines[1]]


def test_lines_are_numbered_in_batch_order_from_the_units_start() -> None:
    """Document by document, line by line, across outcomes: failed documents and
    dead-lettered lines hold their places (docs/api.md#jobs)."""
    start = chunk_start(3)
    docs = [
        _doc("D9", _line(4), _line(2, tier="T7")),
        _doc("D1", _line(1), _line(3), version=8),  # no contract: fails whole
        _doc("D5", _line(7)),
    ]
    plan = plan_chunk(KIND, docs, CONTRACTS, start)
    assert [(p.document.document_id, p.line.line_ref, p.position) for p in plan.lines] == [
        ("D9", "4", start),
        ("D9", "2", start + 1),
        ("D5", "7", start + 4),
    ]
    [failed] = plan.failed_documents
    assert failed.document is not None
    assert (failed.document.document_id, failed.position) == ("D1", start + 2)
    assert start == 3 << 32 and chunk_start(0) == 0
    # Without a start (a requeue whose place is not known), no line has one.
    assert {p.position for p in plan_chunk(KIND, docs, CONTRACTS).lines} == {None}
    failures = plan_failure(KIND, docs, "retries_exhausted", "TransientError", "x", start)
    assert [f.position for f in failures.failed_documents] == [start, start + 2, start + 4]


def test_a_requeued_line_keeps_its_position() -> None:
    start = chunk_start(1) + 40  # the document's first line, as its dead letter recorded
    plan = plan_chunk(KIND, [_repeated_line_no()], CONTRACTS, start)
    [only] = restrict_to_line(plan, "1", 1).lines
    assert only.position == start + 1
    failed = plan_failure(
        KIND, [_repeated_line_no()], "retries_exhausted", "TransientError", "x", start
    )
    [failure] = restrict_to_line(failed, "1", 1).failed_documents
    assert failure.position == start + 1
