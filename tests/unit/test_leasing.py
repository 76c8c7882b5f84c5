"""What a settle attempt leases (shared/domain/pipeline/leasing.py): one lease per document
for the kinds whose keys name their document, which covers every line's key;
each line's key otherwise."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.kinds import KINDS
from shared.domain.pipeline.leasing import document_lease, leases_by_version
from shared.domain.pipeline.settlement import ChunkPlan, PlannedLine
from tests.unit.test_settle_fast_paths import settled_lines, with_dead_lines

FAST = settings(max_examples=150, deadline=None, database=None)


@FAST
@given(settled=settled_lines(), dead=st.lists(st.booleans(), max_size=80))
def test_a_plan_leases_each_document_with_a_line_that_may_post(
    settled: list[PlannedLine], dead: list[bool]
) -> None:
    lines = with_dead_lines(settled, dead)
    plan = ChunkPlan(lines=lines)
    wanted: dict[int, set[str]] = {}
    for p in lines:
        if p.settlement is not None:
            lease = document_lease(p.document.partition_key, p.document.document_id)
            wanted.setdefault(p.document.contract_version, set()).add(lease)
    assert leases_by_version(plan, per_document=True) == wanted
    assert leases_by_version(plan, per_document=False) == plan.claim_keys_by_version()


def test_the_kinds_that_lease_documents_are_those_whose_keys_name_them() -> None:
    assert {name for name, kind in KINDS.items() if kind.keys_name_document} == {
        "promo_accrual",
        "freight_audit",
    }


# Few ids, so that documents (and so keys) repeat; no "|" (an Identifier has none).
_ids = st.sampled_from(["V1", "V2", "D1", "D2", "a b", "é"])


@st.composite
def promo_document(draw: Any) -> dict[str, Any]:
    line_nos = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))
    return {
        "document_id": draw(_ids),
        "partition_key": draw(_ids),
        "contract_version": 1,
        "period": draw(st.sampled_from(["2026-Q1", "2026-Q2"])),
        "lines": [
            {
                "line_no": n,
                "sku": draw(st.sampled_from(["S1", "S2"])),
                "promo_tier": "T1",
                "qualifying_units": "1",
                "claimed_amount": "1.00",
            }
            for n in line_nos
        ],
    }


@st.composite
def freight_document(draw: Any) -> dict[str, Any]:
    legs = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3, unique=True))
    return {
        "document_id": draw(_ids),
        "partition_key": draw(_ids),
        "contract_version": 1,
        "document_type": "EDI",
        "legs": [{"leg_no": n, "miles": "10", "billed_amount": "1.00"} for n in legs],
    }


def _leases_cover_keys(kind_name: str, raw: list[dict[str, Any]]) -> None:
    """Two lines with one key (any two attempts at one line) share their lease."""
    kind = KINDS[kind_name]
    lease_of_key: dict[str, str] = {}
    for doc in raw:
        document = kind.document_model.model_validate(doc)
        lease = document_lease(document.partition_key, document.document_id)
        for line in kind.lines(document):
            assert lease_of_key.setdefault(line.reconciliation_key, lease) == lease


@FAST
@given(st.lists(promo_document(), min_size=1, max_size=6))
def test_a_promo_lines_key_always_has_its_documents_lease(raw: list[dict[str, Any]]) -> None:
    _leases_cover_keys("promo_accrual", raw)


@FAST
@given(st.lists(freight_document(), min_size=1, max_size=6))
def test_a_freight_legs_key_always_has_its_documents_lease(raw: list[dict[str, Any]]) -> None:
    _leases_cover_keys("freight_audit", raw)
