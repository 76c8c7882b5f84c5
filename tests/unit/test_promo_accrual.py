"""shared.domain.kinds.promo_accrual: model = units * tier_rate, rounded once to 0.01 half up.

Posted when abs(claimed - model) <= tolerance (boundary included), else disputed
(docs/architecture.md#promotional-accruals, docs/architecture.md#settlement-kinds).
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from shared.domain.kinds.base import Line
from shared.domain.kinds.promo_accrual import PromoAccrual, PromoContract, PromoDocument, PromoLine
from shared.errors import BusinessError

KIND = PromoAccrual()


def _line(**over: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "line_no": 1,
        "sku": "SKU-48213",
        "promo_tier": "T2",
        "qualifying_units": "37",
        "claimed_amount": "16.65",
    }
    line.update(over)
    return line


def _doc(*lines: dict[str, Any], **over: Any) -> PromoDocument:
    doc: dict[str, Any] = {
        "document_id": "INV-2026-000123",
        "partition_key": "VENDOR-0042",
        "contract_version": 7,
        "period": "2026-Q3",
        "lines": list(lines) or [_line()],
    }
    doc.update(over)
    return PromoDocument.model_validate(doc)


def _contract(tolerance: str = "0.05", **rates: str) -> PromoContract:
    tier_rates = rates or {"T1": "0.125", "T2": "0.45"}
    return PromoContract.model_validate({"tier_rates": tier_rates, "tolerance": tolerance})


def _settle(units: str, rate: str, claimed: str, tolerance: str = "0.05") -> Any:
    doc = _doc(_line(promo_tier="T", qualifying_units=units, claimed_amount=claimed))
    [line] = KIND.lines(doc)
    return KIND.settle(doc, line, _contract(tolerance, T=rate))


# --- the model, hand-worked -----------------------------------------------------------------


def test_spec_example_line_posts_at_exactly_the_claimed_amount() -> None:
    # 37 units * 0.45 = 16.65 exactly; claimed 16.65; |16.65 - 16.65| = 0 <= 0.05 -> posted.
    result = _settle("37", "0.45", "16.65")
    assert result.outcome == "posted"
    assert result.amount == Decimal("16.65")
    assert result.claimed_amount == Decimal("16.65")


def test_rounding_tie_rounds_half_up() -> None:
    # 3 units * 0.125 = 0.375 -> half up at 0.01 -> 0.38.
    result = _settle("3", "0.125", "0.38", tolerance="0")
    assert result.amount == Decimal("0.38")
    assert str(result.amount) == "0.38"
    assert result.outcome == "posted"


def test_tie_is_half_up_not_bankers_rounding() -> None:
    # 1 unit * 0.125 = 0.125 -> half up -> 0.13 (half-even would give 0.12).
    assert _settle("1", "0.125", "0.13", tolerance="0").amount == Decimal("0.13")
    # 5 units * 0.125 = 0.625 -> 0.63 (half-even would give 0.62).
    assert _settle("5", "0.125", "0.63", tolerance="0").amount == Decimal("0.63")


def test_rounding_happens_once_on_the_product_not_on_the_rate() -> None:
    # 10 units * 0.0045 = 0.045 -> 0.05. Rounding the rate first (0.0045 -> 0.00) would give 0.00.
    assert _settle("10", "0.0045", "0.05").amount == Decimal("0.05")
    # 3 units * 0.001666 = 0.004998 -> 0.00 (below half a cent).
    assert _settle("3", "0.001666", "0.00").amount == Decimal("0.00")


def test_fractional_units_are_exact() -> None:
    # 2.5 units * 0.37 = 0.925 -> 0.93.
    assert _settle("2.5", "0.37", "0.93").amount == Decimal("0.93")
    # 0.333333 units * 3 = 0.999999 -> 1.00.
    assert _settle("0.333333", "3", "1.00").amount == Decimal("1.00")


def test_amount_always_carries_two_places() -> None:
    # 4 units * 2.5 = 10.0 -> 10.00.
    result = _settle("4", "2.5", "10")
    assert str(result.amount) == "10.00"


def test_large_volume_stays_exact() -> None:
    # 999999 units * 1.5 = 1499998.5 -> 1499998.50.
    assert _settle("999999", "1.5", "1499998.50").amount == Decimal("1499998.50")
    # 123456789.123456 units * 0.000001 = 123.456789123456 -> 123.46.
    assert _settle("123456789.123456", "0.000001", "123.46").amount == Decimal("123.46")


def test_zero_units_model_zero() -> None:
    result = _settle("0", "0.45", "0.00")
    assert result.amount == Decimal("0.00")
    assert result.outcome == "posted"


# --- tolerance: the boundary is posted -------------------------------------------------------


@pytest.mark.parametrize(
    ("claimed", "outcome"),
    [
        # model 37 * 0.45 = 16.65, tolerance 0.05
        ("16.65", "posted"),  # variance 0.00
        ("16.70", "posted"),  # variance +0.05: exactly the tolerance, boundary included
        ("16.60", "posted"),  # variance -0.05: boundary included on the low side too
        ("16.6999", "posted"),  # variance +0.0499
        ("16.7001", "disputed"),  # variance +0.0501
        ("16.71", "disputed"),  # variance +0.06
        ("16.59", "disputed"),  # variance -0.06
        ("0", "disputed"),
        ("-16.65", "disputed"),
    ],
)
def test_posted_within_tolerance_including_the_boundary(claimed: str, outcome: str) -> None:
    result = _settle("37", "0.45", claimed)
    assert result.outcome == outcome
    assert result.amount == Decimal("16.65")
    assert result.claimed_amount == Decimal(claimed)


def test_boundary_is_measured_against_the_rounded_model() -> None:
    # model: 3 * 0.125 = 0.375 -> 0.38. Claimed 0.33: |0.33 - 0.38| = 0.05 <= 0.05 -> posted.
    # (Against the unrounded 0.375 the variance would be 0.045: posted either way.)
    assert _settle("3", "0.125", "0.33").outcome == "posted"
    # Claimed 0.4301: |0.4301 - 0.38| = 0.0501 > 0.05 -> disputed
    # (against the unrounded 0.375 it would be 0.0551: disputed either way).
    assert _settle("3", "0.125", "0.4301").outcome == "disputed"
    # Claimed 0.43: |0.43 - 0.38| = 0.05 -> posted, although |0.43 - 0.375| = 0.055.
    assert _settle("3", "0.125", "0.43").outcome == "posted"


def test_zero_tolerance_posts_only_an_exact_match() -> None:
    assert _settle("37", "0.45", "16.65", tolerance="0").outcome == "posted"
    assert _settle("37", "0.45", "16.66", tolerance="0").outcome == "disputed"
    assert _settle("37", "0.45", "16.6501", tolerance="0").outcome == "disputed"


# --- business errors -------------------------------------------------------------------------


def test_unknown_tier_is_a_business_error() -> None:
    doc = _doc(_line(promo_tier="T9"))
    [line] = KIND.lines(doc)
    with pytest.raises(BusinessError) as info:
        KIND.settle(doc, line, _contract())
    assert info.value.reason == "unknown_promo_tier"


def test_tier_names_are_case_sensitive() -> None:
    doc = _doc(_line(promo_tier="t2"))
    [line] = KIND.lines(doc)
    with pytest.raises(BusinessError) as info:
        KIND.settle(doc, line, _contract())
    assert info.value.reason == "unknown_promo_tier"


@pytest.mark.parametrize("units", ["-1", "-0.000001"])
def test_negative_units_are_a_business_error(units: str) -> None:
    doc = _doc(_line(qualifying_units=units))
    [line] = KIND.lines(doc)
    with pytest.raises(BusinessError) as info:
        KIND.settle(doc, line, _contract())
    assert info.value.reason == "negative_quantity"


def test_unknown_tier_is_never_settled_as_zero() -> None:
    doc = _doc(_line(promo_tier="T9", claimed_amount="0"))
    [line] = KIND.lines(doc)
    with pytest.raises(BusinessError):
        KIND.settle(doc, line, _contract())


# --- lines and keys ---------------------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_lines_carry_document_line_ref_claim_and_the_spec_key() -> None:
    doc = _doc(
        _line(line_no=1),
        _line(
            line_no=2,
            sku="SKU-2",
            store_id="ST-9",
            transaction_date="2026-07-01",
            promo_tier="T1",
            claimed_amount="1.25",
        ),
    )
    first, second = KIND.lines(doc)

    assert first.document_id == "INV-2026-000123"
    assert first.line_ref == "1"
    assert first.claimed_amount == Decimal("16.65")
    assert first.raw.sku == "SKU-48213"
    item1 = _sha("1|SKU-48213||")
    assert first.reconciliation_key == _sha(f"VENDOR-0042|INV-2026-000123|{item1}|T2|2026-Q3")

    assert second.line_ref == "2"
    assert second.claimed_amount == Decimal("1.25")
    item2 = _sha("2|SKU-2|ST-9|2026-07-01")
    assert second.reconciliation_key == _sha(f"VENDOR-0042|INV-2026-000123|{item2}|T1|2026-Q3")
    assert KIND.line_count(doc) == 2


def test_same_line_in_another_period_is_another_identity() -> None:
    [q3] = KIND.lines(_doc(_line(), period="2026-Q3"))
    [q4] = KIND.lines(_doc(_line(), period="2026-Q4"))
    assert q3.reconciliation_key != q4.reconciliation_key


def test_claimed_amount_does_not_change_the_key() -> None:
    [a] = KIND.lines(_doc(_line(claimed_amount="16.65")))
    [b] = KIND.lines(_doc(_line(claimed_amount="99.00")))
    assert a.reconciliation_key == b.reconciliation_key


def test_settle_uses_the_raw_line_model() -> None:
    doc = _doc()
    [line] = KIND.lines(doc)
    assert isinstance(line, Line)
    assert isinstance(line.raw, PromoLine)


def test_kind_metadata() -> None:
    assert KIND.name == "promo_accrual"
    assert KIND.document_model is PromoDocument
    assert KIND.contract_model is PromoContract


# --- wire models -------------------------------------------------------------------------------


def test_contract_body_from_the_spec_parses() -> None:
    contract = PromoContract.model_validate_json(
        '{"tier_rates": {"T1": "0.125", "T2": "0.45"}, "tolerance": "0.05"}'
    )
    assert contract.tier_rates == {"T1": Decimal("0.125"), "T2": Decimal("0.45")}
    assert contract.tolerance == Decimal("0.05")


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ('{"tier_rates": {"T1": 0.125}, "tolerance": "0.05"}', "decimal_must_be_string"),
        ('{"tier_rates": {"T1": "0.125"}, "tolerance": 0.05}', "decimal_must_be_string"),
        ('{"tier_rates": {"T1": "0.1234567"}, "tolerance": "0.05"}', "decimal_out_of_range"),
        ('{"tier_rates": {"T1": "0.125"}, "tolerance": "0.00001"}', "decimal_out_of_range"),
        ('{"tier_rates": {}, "tolerance": "0.05"}', "contract_invalid"),
        ('{"tier_rates": {"T1": "1"}, "tolerance": "0", "x": 1}', "extra_forbidden"),
    ],
)
def test_invalid_contract_bodies_are_refused(body: str, error_type: str) -> None:
    with pytest.raises(ValidationError) as info:
        PromoContract.model_validate_json(body)
    assert [e["type"] for e in info.value.errors()] == [error_type]


@pytest.mark.parametrize(
    ("over", "error_type"),
    [
        ({"line_no": 0}, "greater_than_equal"),
        ({"sku": ""}, "string_too_short"),
        ({"sku": "bad\nsku"}, "string_pattern_mismatch"),
        ({"claimed_amount": "1.23456"}, "decimal_out_of_range"),
        ({"qualifying_units": "1.1234567"}, "decimal_out_of_range"),
        ({"qualifying_units": 37}, "decimal_must_be_string"),
        ({"transaction_date": "not-a-date"}, "date_invalid"),
        ({"unit_price": "1.00"}, "extra_forbidden"),
    ],
)
def test_invalid_lines_are_refused(over: dict[str, Any], error_type: str) -> None:
    with pytest.raises(ValidationError) as info:
        PromoLine.model_validate(_line(**over))
    assert [e["type"] for e in info.value.errors()] == [error_type]


def test_document_needs_at_least_one_line() -> None:
    with pytest.raises(ValidationError) as info:
        _doc(lines=[])
    assert [e["type"] for e in info.value.errors()] == ["too_short"]


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 8): transaction_date was Field(strict=False), so "
    "0, Unix seconds or milliseconds, numeric strings and midnight datetimes were dates"
)
@pytest.mark.parametrize(
    "value",
    [
        0,
        1782864000,  # 2026-07-01 in Unix seconds
        1782864000000,  # ... and in milliseconds
        "1782864000",
        "0",
        "2026-07-01T00:00:00",
        "2026-07-01T00:00:00Z",
        "2026-07-01 00:00",
        "20260701",
        "2026-7-1",
        "2026-07-01Z",
        " 2026-07-01",
        "2026-02-30",
        "0000-01-01",
        "\uff12\uff10\uff12\uff16-07-01",  # fullwidth digits
        1.5,
        True,
        [],
    ],
)
def test_transaction_date_is_an_iso_date_string_or_date_invalid(value: Any) -> None:
    line = {"line_no": 1, "sku": "SKU-1", "promo_tier": "T1", "qualifying_units": "1"}
    line |= {"claimed_amount": "1", "transaction_date": value}
    with pytest.raises(ValidationError) as info:
        PromoLine.model_validate_json(json.dumps(line))
    assert [e["type"] for e in info.value.errors()] == ["date_invalid"]


@pytest.mark.parametrize("value", ["2026-07-01", "2024-02-29", "9999-12-31", "0001-01-01"])
def test_an_iso_date_string_is_that_date(value: str) -> None:
    line = {"line_no": 1, "sku": "SKU-1", "promo_tier": "T1", "qualifying_units": "1"}
    line |= {"claimed_amount": "1", "transaction_date": value}
    parsed = PromoLine.model_validate_json(json.dumps(line))
    assert parsed.transaction_date is not None and parsed.transaction_date.isoformat() == value
    assert parsed.model_dump(mode="json")["transaction_date"] == value
