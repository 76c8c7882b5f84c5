"""freight_audit's msgspec screen accepts only what FreightDocument accepts, with
the same meaning (shared/domain/kinds/freight_screen.py): generated documents
mixing valid values with the wrong ones producers (and partners' files) send."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.domain.kinds import KINDS, freight_audit, freight_screen
from shared.domain.kinds.screen import screen
from shared.domain.synthetic import freight_batch

FREIGHT = KINDS["freight_audit"]

_ODD_TEXT = st.sampled_from(["", "x" * 129, "a|b", "tab\there", "\x7f", "\x9f", "\u2028"])
_ODD_AMOUNT = (
    st.sampled_from(
        ["1e3", "NaN", "+5", ".5", "5.", "1000000000000", " 1", "1.0000001", "\u0661", "-0"]
    )
    | st.integers(-5, 5)
    | st.floats(allow_nan=True)
    | st.none()
)
_ODD_INT = st.sampled_from([0, -1, 2**31, True, 1.0, "1", None])
_PAYLOAD = base64.b64encode(b"ISA*00*          *00*~ST*210*0001~").decode()
_ODD_PAYLOAD = st.sampled_from(["", "abc", "ab=c", "YWJj\n", "YW Jj", "YWJj====", "****", 7])


def _mostly(valid: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.integers(0, 9).flatmap(lambda n: odd if n == 0 else valid)


_TEXT = _mostly(st.sampled_from(["A", "LIFTGATE", "x" * 128, "é", "CARRIER 7"]), _ODD_TEXT)
_MONEY = _mostly(st.sampled_from(["1", "2754.33", "-0.01", "1.2345", "999999999999"]), _ODD_AMOUNT)
_QUANTITY = _mostly(st.sampled_from(["812", "78.89", "1.234567", "-2", "0"]), _ODD_AMOUNT)
_INT = _mostly(st.sampled_from([1, 2, 2**31 - 1]), _ODD_INT)
_BASIS = _mostly(
    st.sampled_from(["mile", "cwt", "unit", "flat", None]), st.sampled_from(["MILE", 1])
)


@st.composite
def legs(draw: st.DrawFn) -> dict[str, Any]:
    leg: dict[str, Any] = {"leg_no": draw(_INT), "billed_amount": draw(_MONEY)}
    for name, strategy in (
        ("miles", _QUANTITY),
        ("rate_basis", _BASIS),
        ("rated_quantity", _QUANTITY),
        ("accessorials", st.lists(_TEXT, max_size=3) | st.none()),
    ):
        if draw(st.booleans()):
            leg[name] = draw(strategy)
    if draw(st.integers(0, 40)) == 0:
        leg["unexpected"] = 1
    return leg


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "document_id": draw(_TEXT),
        "partition_key": draw(_TEXT),
        "contract_version": draw(_INT),
        "document_type": draw(_mostly(st.sampled_from(["EDI", "PDF", "XML"]), st.just("edi"))),
        "legs": draw(st.lists(legs(), min_size=draw(_mostly(st.just(1), st.just(0))), max_size=2)),
    }
    if draw(st.booleans()):
        doc["raw_payload"] = draw(_mostly(st.just(_PAYLOAD), _ODD_PAYLOAD | st.none()))
    if draw(st.booleans()):
        doc["correlation_id"] = draw(st.none() | _TEXT)
    return doc


@settings(max_examples=800, deadline=None)
@given(documents())
def test_what_the_screen_accepts_the_model_accepts_with_the_same_meaning(doc: Any) -> None:
    for raw in (json.dumps(doc, ensure_ascii=False).encode(), json.dumps(doc).encode()):
        screened = screen(FREIGHT.screen, raw)
        if screened is None:
            continue  # the model decides
        try:
            model = FREIGHT.document_model.model_validate_json(raw)
        except ValidationError as exc:  # pragma: no cover - the property under test
            raise AssertionError(f"screen accepted what the model refuses: {exc}") from None
        assert (model.document_id, model.partition_key, model.contract_version) == (
            screened.document_id,
            screened.partition_key,
            screened.contract_version,
        )
        assert (model.document_type, model.raw_payload, model.correlation_id) == (
            screened.document_type,
            screened.raw_payload,
            screened.correlation_id,
        )
        assert [
            (leg.leg_no, leg.rate_basis, leg.accessorials, str(leg.billed_amount))
            for leg in model.legs
        ] == [
            (leg.leg_no, leg.rate_basis, leg.accessorials, leg.billed_amount)
            for leg in screened.legs
        ]
        assert FREIGHT.line_count(model) == FREIGHT.line_count(screened)


def test_generated_invoices_take_the_fast_path() -> None:
    batch = freight_batch(60, carriers=3)
    assert all(screen(FREIGHT.screen, json.dumps(d).encode()) for d in batch["documents"])


@pytest.mark.parametrize(
    ("change", "screened"),
    [
        ({}, True),
        ({"raw_payload": "not base64!"}, False),
        ({"raw_payload": "YWJj"}, True),
        ({"legs": [{"leg_no": 1, "billed_amount": "1.00", "rate_basis": "cwt"}]}, False),
        ({"legs": [{"leg_no": 1, "billed_amount": "1.00", "accessorials": ["A|B"]}]}, False),
        ({"legs": [{"leg_no": 1, "billed_amount": "1.5E2"}]}, False),  # the model's to read
        ({"legs": []}, False),
    ],
)
def test_the_screen_defers_what_it_cannot_vouch_for(change: dict[str, Any], screened: bool) -> None:
    doc = {**freight_batch(1, carriers=1)["documents"][0], **change}
    assert (screen(FREIGHT.screen, json.dumps(doc).encode()) is not None) is screened


def test_the_screen_holds_the_models_payload_limit() -> None:
    assert freight_screen.MAX_RAW_PAYLOAD == freight_audit.MAX_RAW_PAYLOAD
