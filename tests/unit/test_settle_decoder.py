"""The worker's msgspec decode of a promo chunk gives the same plan as the
Pydantic model, on every document the model accepts (shared/domain/pipeline/settlement.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from shared.domain.kinds import KINDS
from shared.domain.kinds.promo_accrual import PromoContract
from shared.domain.pipeline.settlement import decode_chunk, document_json, plan_chunk

PROMO = KINDS["promo_accrual"]
ADAPTER: TypeAdapter[Any] = TypeAdapter(list[PROMO.document_model])
CONTRACT = PromoContract.model_validate(
    {"tier_rates": {"A": "0.125", "SKU-1": "1.10", "é": "3"}, "tolerance": "0.05"}
)


def _plan(documents: list[Any]) -> list[tuple[Any, ...]]:
    contracts = {(d.partition_key, d.contract_version): CONTRACT for d in documents}
    plan = plan_chunk(PROMO, documents, contracts)
    return [
        (
            p.line.reconciliation_key,
            p.line.line_ref,
            p.reason,
            p.settlement
            and (p.settlement.outcome, p.settlement.amount, p.settlement.claimed_amount),
        )
        for p in plan.lines
    ]


_ID = st.sampled_from(["A", "SKU-1", "é", "INV\\2026", "x" * 128, "\u2028 line"])
# A partition_key or document_id: no whitespace at either end (shared/domain/kinds/ids.py).
_ADDRESS = st.sampled_from(["A", "SKU-1", "é", "INV\\2026", "x" * 128, "a\u2028 line"])
_AMOUNT = st.sampled_from(["1", "16.65", "-0.01", "1.2345", "1e3", "12.5E-1", "0", "999999999999"])
_DATE = st.sampled_from([None, "2026-07-01", "2024-02-29", "2000-02-29"])


@st.composite
def valid_documents(draw: st.DrawFn) -> dict[str, Any]:
    """Documents the model accepts, odd-but-valid values included."""
    lines = []
    for n in range(1, draw(st.integers(1, 4)) + 1):
        line: dict[str, Any] = {
            "line_no": n,
            "sku": draw(_ID),
            "promo_tier": draw(st.sampled_from(["A", "SKU-1", "é", "T9"])),
            "qualifying_units": draw(_AMOUNT),
            "claimed_amount": draw(_AMOUNT),
        }
        if draw(st.booleans()):
            line["store_id"] = draw(st.none() | _ID)
        if draw(st.booleans()):
            line["transaction_date"] = draw(_DATE)
        lines.append(line)
    doc: dict[str, Any] = {
        "document_id": draw(_ADDRESS),
        "partition_key": draw(_ADDRESS),
        "contract_version": draw(st.integers(1, 2**31 - 1)),
        "period": draw(_ID),
        "lines": lines,
    }
    if draw(st.booleans()):
        doc["correlation_id"] = draw(st.none() | _ID)
    return doc


@settings(max_examples=300, deadline=None)
@given(st.lists(valid_documents(), min_size=1, max_size=3))
def test_msgspec_and_pydantic_decodes_plan_the_same(docs) -> None:
    payload = json.dumps(docs, ensure_ascii=False).encode()
    lines = sum(len(d["lines"]) for d in docs)
    # The msgspec decode where it reads the chunk (an escape, an exponent: the model).
    fast = decode_chunk(PROMO, ADAPTER, payload, lines).documents
    model = ADAPTER.validate_json(payload)
    assert _plan(fast) == _plan(model)
    # A dead letter's payload decodes back to the same document either way.
    for f, m in zip(fast, model, strict=True):
        assert PROMO.document_model.model_validate_json(document_json(f)) == m


def test_plain_chunks_take_the_fast_reading_and_odd_ones_the_model() -> None:
    line = {
        "line_no": 1,
        "sku": "A",
        "promo_tier": "A",
        "qualifying_units": "37",
        "claimed_amount": "4.63",
    }
    doc = {"document_id": "D", "partition_key": "V", "contract_version": 1, "period": "P"}
    plain = json.dumps([{**doc, "lines": [line]}]).encode()
    assert PROMO.settle_decoder(plain) is not None
    for odd in (
        {"qualifying_units": "1e3"},  # valid, but not the plain form
        {"claimed_amount": 4.63},  # a JSON number: the model refuses it
        {"claimed_amount": "NaN"},
        {"claimed_amount": "4.12345"},
        {"sku": "INV\\1"},  # an escape
        {"extra": 1},
    ):
        payload = json.dumps([{**doc, "lines": [{**line, **odd}]}]).encode()
        assert PROMO.settle_decoder(payload) is None, odd


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 2): a stored chunk's 1.30000000000000000000000000001 "
    "was read by the model (places counted after rounding) and settled as 1.30"
)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("claimed_amount", "1.30000000000000000000000000001"),
        ("qualifying_units", "1.29999999999999999999999999999"),
        ("transaction_date", 1782864000),
    ],
)
def test_a_stored_chunk_value_outside_the_limits_is_schema_invalid_never_settled(
    field: str, value: Any
) -> None:
    """What the front door refuses, a worker reading a stored (or requeued) chunk
    refuses too: that document alone is dead-lettered, nothing is rounded."""
    line = {"line_no": 1, "sku": "A", "promo_tier": "A", "qualifying_units": "37"}
    line |= {"claimed_amount": "4.63", field: value}
    bad = {"document_id": "D1", "partition_key": "V", "contract_version": 1, "period": "P"}
    good = {**bad, "document_id": "D2", "lines": [{**line, field: "2026-07-01"}]}
    if field != "transaction_date":
        good["lines"][0][field] = "1.30"
    payload = json.dumps([{**bad, "lines": [line]}, good]).encode()
    decoded = decode_chunk(PROMO, ADAPTER, payload, 2)
    assert [d.document_id for d in decoded.documents] == ["D2"]
    assert [(f.reason, f.document_id, f.covered) for f in decoded.failures] == [
        ("schema_invalid", "D1", 1)
    ]
