"""shared.domain.kinds.recipe_cost: theoretical_cost = sum(bom_qty * snapshot price), rounded once.

Rounding is ROUND_HALF_UP at 0.0001, applied once to the sum (docs/architecture.md#recipe-costs).
One line per location, keyed by sha256 of the request's canonical bytes plus the location; a BOM sku
without a price fails the whole request with ``missing_price``
(docs/architecture.md#failures-and-reason-codes).
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.domain.kinds import BATCH, KINDS, get_kind
from shared.domain.kinds.recipe_cost import (
    RecipeBatch,
    RecipeContract,
    RecipeCost,
    RecipeDocument,
    request_fingerprint,
)
from shared.domain.pipeline.settlement import plan_chunk
from shared.errors import BusinessError

KIND = RecipeCost()

# Real USDA ERS retail prices, per pound, copied from
# /work/shared/realdata/recipes/Fruit_Prices_2022.csv (column RetailPrice):
#   line 2:  Apples,Fresh,1.8541,per pound
#   line 10: Bananas,Fresh,0.5971,per pound
#   line 14: Blueberries,Fresh,4.1575,per pound
#   line 16: Cantaloupe,Fresh,0.7523,per pound
USDA_2022 = {
    "APPLES-FRESH": "1.8541",
    "BANANAS-FRESH": "0.5971",
    "BLUEBERRIES-FRESH": "4.1575",
    "CANTALOUPE-FRESH": "0.7523",
}
# A fruit cup: edible-portion pounds of each fruit (our own bill of materials).
FRUIT_CUP_BOM = {
    "APPLES-FRESH": "0.5",
    "BANANAS-FRESH": "0.25",
    "BLUEBERRIES-FRESH": "0.125",
    "CANTALOUPE-FRESH": "0.75",
}

# The IBA "Vesper" (first recipe of /work/shared/realdata/recipes/recipes.json):
#   Gin 6 cl, Vodka 1.5 cl, Lillet Blonde 0.75 cl.
# recipes.json / ingredients.json carry no prices: the per-cl prices below are our own.
VESPER_BOM = {"GIN": "6", "VODKA": "1.5", "LILLET-BLONDE": "0.75"}
VESPER_PRICES = {"GIN": "0.3290", "VODKA": "0.2850", "LILLET-BLONDE": "0.2199"}


def _doc_dict(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "document_id": "RCP-REQ-0001",
        "partition_key": "RECIPE-FRUIT-CUP",
        "contract_version": 3,
        "recipe_id": "RECIPE-FRUIT-CUP",
        "location_ids": ["LOC-BOSTON", "LOC-DENVER"],
        "effective_at": "2026-07-01T06:00:00Z",
        "pricing_snapshot": dict(USDA_2022),
        "trigger": "vendor_rate",
    }
    doc.update(over)
    return doc


def _doc(**over: Any) -> RecipeDocument:
    return RecipeDocument.model_validate_json(json.dumps(_doc_dict(**over)))


def _contract(bom: dict[str, str] | None = None) -> RecipeContract:
    return RecipeContract.model_validate_json(json.dumps({"bom": bom or FRUIT_CUP_BOM}))


def _cost(bom: dict[str, str], prices: dict[str, str]) -> Decimal:
    doc = _doc(pricing_snapshot=prices, location_ids=["LOC-1"])
    [line] = KIND.lines(doc)
    result = KIND.settle(doc, line, _contract(bom))
    assert result.outcome == "posted"
    assert result.claimed_amount is None
    assert result.note is None
    return result.amount


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _keys(doc: RecipeDocument) -> dict[str, str]:
    return {line.line_ref: line.reconciliation_key for line in KIND.lines(doc)}


# --- the model, hand-worked ------------------------------------------------------------------


def test_fruit_cup_at_usda_prices_is_the_sum_rounded_once() -> None:
    # apples      0.5   * 1.8541 = 0.92705
    # bananas     0.25  * 0.5971 = 0.149275
    # blueberries 0.125 * 4.1575 = 0.5196875
    # cantaloupe  0.75  * 0.7523 = 0.564225
    # sum = 0.92705 + 0.149275 + 0.5196875 + 0.564225 = 2.1602375 -> 0.0001 half up -> 2.1602
    assert _cost(FRUIT_CUP_BOM, USDA_2022) == Decimal("2.1602")


def test_rounding_each_term_first_would_give_a_different_cost() -> None:
    # Same fruit cup. Rounding each term to 0.0001 first:
    #   0.92705 -> 0.9271, 0.149275 -> 0.1493, 0.5196875 -> 0.5197, 0.564225 -> 0.5642
    #   0.9271 + 0.1493 + 0.5197 + 0.5642 = 2.1603  (wrong: one ten-thousandth too high)
    # Rounding once: 2.1602375 -> 2.1602.
    per_term = sum(
        (
            (Decimal(FRUIT_CUP_BOM[sku]) * Decimal(USDA_2022[sku])).quantize(
                Decimal("0.0001"), rounding=ROUND_HALF_UP
            )
            for sku in FRUIT_CUP_BOM
        ),
        Decimal(0),
    )
    assert per_term == Decimal("2.1603")
    assert _cost(FRUIT_CUP_BOM, USDA_2022) == Decimal("2.1602")


def test_small_terms_that_round_to_zero_alone_still_count_in_the_sum() -> None:
    # 0.4 * 0.0001 = 0.00004 twice; each alone rounds to 0.0000,
    # the sum 0.00008 rounds to 0.0001.
    bom = {"SALT": "0.4", "PEPPER": "0.4"}
    prices = {"SALT": "0.0001", "PEPPER": "0.0001"}
    assert _cost(bom, prices) == Decimal("0.0001")


def test_tie_at_the_fifth_place_rounds_half_up() -> None:
    # 0.5 * 1.8541 (USDA apples) = 0.92705: a 5 at the 5th place -> half up -> 0.9271
    # (banker's rounding would give 0.9270).
    assert _cost({"APPLES-FRESH": "0.5"}, USDA_2022) == Decimal("0.9271")
    # 0.5 * 0.0001 = 0.00005 -> 0.0001 (half-even would give 0.0000).
    assert _cost({"SALT": "0.5"}, {"SALT": "0.0001"}) == Decimal("0.0001")
    # 0.5 * 0.0003 = 0.00015 -> 0.0002 (the even neighbour; half up agrees here).
    assert _cost({"SALT": "0.5"}, {"SALT": "0.0003"}) == Decimal("0.0002")


def test_just_below_the_tie_rounds_down() -> None:
    # 0.499999 * 0.0001 = 0.0000499999 -> 0.0000.
    assert _cost({"SALT": "0.499999"}, {"SALT": "0.0001"}) == Decimal("0.0000")


def test_cost_always_carries_four_places() -> None:
    # 4 * 0.5 = 2.0 -> 2.0000.
    assert str(_cost({"EGG": "4"}, {"EGG": "0.5"})) == "2.0000"


def test_vesper_quantities_from_iba_recipes() -> None:
    # gin   6    * 0.3290 = 1.9740
    # vodka 1.5  * 0.2850 = 0.42750
    # lillet 0.75 * 0.2199 = 0.164925
    # sum = 1.9740 + 0.42750 + 0.164925 = 2.566425 -> 2.5664
    assert _cost(VESPER_BOM, VESPER_PRICES) == Decimal("2.5664")


def test_six_place_quantities_and_prices_are_exact() -> None:
    # 123.456789 * 0.000001 = 0.000123456789 -> 0.0001
    assert _cost({"X": "123.456789"}, {"X": "0.000001"}) == Decimal("0.0001")
    # 999999.999999 * 2 = 1999999.999998 -> 2000000.0000
    assert _cost({"X": "999999.999999"}, {"X": "2"}) == Decimal("2000000.0000")


def test_extra_snapshot_skus_not_in_the_bom_are_ignored() -> None:
    # Only the BOM's sku counts: 0.5 * 1.8541 = 0.92705 -> 0.9271; the other prices are unused.
    prices = dict(USDA_2022, **{"KIWI-FRESH": "2.0000", "MANGO-FRESH": "1.1000"})
    assert _cost({"APPLES-FRESH": "0.5"}, prices) == Decimal("0.9271")


# --- lines: one per location, same cost ------------------------------------------------------


def test_one_line_per_location_with_the_same_cost() -> None:
    doc = _doc(
        partition_key="IBA-VESPER",
        recipe_id="IBA-VESPER",
        location_ids=["BAR-PARIS", "BAR-LONDON", "BAR-NYC"],
        pricing_snapshot=VESPER_PRICES,
        trigger="spec_change",
    )
    lines = KIND.lines(doc)
    assert [line.line_ref for line in lines] == ["BAR-PARIS", "BAR-LONDON", "BAR-NYC"]
    assert KIND.line_count(doc) == 3
    contract = _contract(VESPER_BOM)
    for line in lines:
        assert line.document_id == "RCP-REQ-0001"
        assert line.claimed_amount is None
        assert line.raw == line.line_ref
        settled = KIND.settle(doc, line, contract)
        # 2.566425 -> 2.5664 at every location (see test_vesper_quantities_from_iba_recipes)
        assert settled.amount == Decimal("2.5664")
        assert settled.outcome == "posted"
    assert len({line.reconciliation_key for line in lines}) == 3


def test_kind_metadata_and_registry() -> None:
    assert KIND.name == "recipe_cost"
    assert isinstance(get_kind("recipe_cost"), RecipeCost)
    assert "recipe_cost" in KINDS
    assert KIND.document_model is RecipeDocument
    assert KIND.contract_model is RecipeContract
    assert KIND.batch_model is RecipeBatch
    # the ledger's delta is measured against the last cost of (recipe, location)
    # (docs/architecture.md#re-pricing-lineage-and-advisory-locks)
    assert KIND.delta_basis == "line_history"


# --- keys ------------------------------------------------------------------------------------


def test_reconciliation_key_recomputed_by_hand() -> None:
    doc = _doc(
        location_ids=["LOC-DENVER", "LOC-BOSTON"],
        effective_at="2026-07-01T06:00:00+00:00",
        pricing_snapshot={"BANANAS-FRESH": "0.5971", "APPLES-FRESH": "1.8540"},
    )
    # canonical bytes: a compact JSON array of the recipe, the sorted locations,
    # effective_at in Z form and [sku, price] pairs sorted by sku (trailing zeros
    # dropped: 1.8540 -> 1.854)
    canonical = (
        '["RECIPE-FRUIT-CUP",["LOC-BOSTON","LOC-DENVER"],"2026-07-01T06:00:00Z",'
        '[["APPLES-FRESH","1.854"],["BANANAS-FRESH","0.5971"]]]'
    )
    fingerprint = _sha(canonical)
    assert request_fingerprint(doc) == fingerprint
    assert _keys(doc) == {
        "LOC-DENVER": _sha(f"{fingerprint}|LOC-DENVER"),
        "LOC-BOSTON": _sha(f"{fingerprint}|LOC-BOSTON"),
    }


def test_fingerprint_ignores_the_order_of_locations_and_of_prices() -> None:
    a = _doc(
        location_ids=["LOC-A", "LOC-B", "LOC-C"],
        pricing_snapshot={"X": "1", "Y": "2", "Z": "3"},
    )
    b = _doc(
        location_ids=["LOC-C", "LOC-A", "LOC-B"],
        pricing_snapshot={"Z": "3", "X": "1", "Y": "2"},
    )
    assert request_fingerprint(a) == request_fingerprint(b)
    assert _keys(a) == _keys(b)


@pytest.mark.parametrize(("left", "right"), [("2.50", "2.5"), ("2.5", "25e-1"), ("100", "1E+2")])
def test_fingerprint_ignores_how_a_price_is_written(left: str, right: str) -> None:
    # 2.50 == 2.5 == 25e-1 and 100 == 1E+2: one price, one request identity.
    a = _doc(pricing_snapshot={"APPLES-FRESH": left})
    b = _doc(pricing_snapshot={"APPLES-FRESH": right})
    assert request_fingerprint(a) == request_fingerprint(b)


def test_z_and_plus_zero_offset_are_the_same_instant_and_the_same_key() -> None:
    a = _doc(effective_at="2026-07-01T06:00:00Z")
    b = _doc(effective_at="2026-07-01T06:00:00+00:00")
    assert _keys(a) == _keys(b)


@pytest.mark.parametrize(
    "over",
    [
        {"effective_at": "2026-07-01T06:00:01Z"},
        {"pricing_snapshot": dict(USDA_2022, **{"APPLES-FRESH": "1.8542"})},
        {"pricing_snapshot": dict(USDA_2022, **{"KIWI-FRESH": "2.0"})},
        {"recipe_id": "RECIPE-OTHER", "partition_key": "RECIPE-OTHER"},
        {"location_ids": ["LOC-BOSTON", "LOC-DENVER", "LOC-AUSTIN"]},
        {"location_ids": ["LOC-BOSTON"]},
    ],
    ids=["effective_at", "a_price", "added_price", "recipe", "added_location", "fewer_locations"],
)
def test_fingerprint_changes_with_any_field_of_the_request(over: dict[str, Any]) -> None:
    base = _doc()
    changed = _doc(**over)
    assert request_fingerprint(changed) != request_fingerprint(base)
    # LOC-BOSTON is in both requests, but it is a different request: a different key
    assert _keys(changed)["LOC-BOSTON"] != _keys(base)["LOC-BOSTON"]


def test_key_does_not_depend_on_document_id_trigger_or_correlation() -> None:
    # The canonical bytes are recipe, locations, effective_at and prices only
    # (docs/architecture.md#reconciliation-keys).
    base = _doc()
    other = _doc(document_id="RCP-REQ-9999", trigger="bulk_import", correlation_id="c-7")
    assert _keys(base) == _keys(other)


def test_keys_are_lower_case_hex_sha256() -> None:
    for key in _keys(_doc()).values():
        assert len(key) == 64
        assert key == key.lower()
        int(key, 16)


# --- missing price: a document-level failure via plan_chunk ----------------------------------


def test_missing_bom_price_fails_the_whole_request_with_missing_price() -> None:
    prices = {k: v for k, v in USDA_2022.items() if k != "BLUEBERRIES-FRESH"}
    doc = _doc(location_ids=["LOC-A", "LOC-B", "LOC-C"], pricing_snapshot=prices)
    plan = plan_chunk(KIND, [doc], {("RECIPE-FRUIT-CUP", 3): _contract()})

    assert plan.lines == []
    [failure] = plan.failed_documents
    assert failure.reason == "missing_price"
    assert failure.error_class == "BusinessError"
    assert failure.document is doc
    assert [line.line_ref for line in failure.lines] == ["LOC-A", "LOC-B", "LOC-C"]
    assert failure.covered == 3
    assert "BLUEBERRIES-FRESH" in failure.message
    assert plan.claim_keys() == []


def test_missing_price_is_never_a_silent_zero() -> None:
    doc = _doc(pricing_snapshot={"APPLES-FRESH": "1.8541"})
    with pytest.raises(BusinessError) as info:
        KIND.check_document(doc, _contract())
    assert info.value.reason == "missing_price"


def test_missing_price_isolates_its_document_and_the_rest_of_the_chunk_settles() -> None:
    good = _doc(document_id="RCP-OK", location_ids=["LOC-A", "LOC-B"])
    bad = _doc(document_id="RCP-BAD", pricing_snapshot={"APPLES-FRESH": "1.8541"})
    plan = plan_chunk(KIND, [bad, good], {("RECIPE-FRUIT-CUP", 3): _contract()})

    [failure] = plan.failed_documents
    assert failure.document is bad
    assert failure.reason == "missing_price"
    assert [(p.line.line_ref, p.settlement and p.settlement.amount) for p in plan.lines] == [
        ("LOC-A", Decimal("2.1602")),  # 2.1602375 -> 2.1602 (fruit cup, worked above)
        ("LOC-B", Decimal("2.1602")),
    ]
    assert all(p.reason is None for p in plan.lines)
    assert plan.claim_keys() == sorted((p.line.reconciliation_key, 3) for p in plan.lines)


def test_extra_snapshot_skus_settle_through_plan_chunk() -> None:
    prices = dict(USDA_2022, **{"KIWI-FRESH": "2.0000"})
    plan = plan_chunk(KIND, [_doc(pricing_snapshot=prices)], {("RECIPE-FRUIT-CUP", 3): _contract()})
    assert plan.failed_documents == []
    assert [p.settlement.amount for p in plan.lines if p.settlement] == [Decimal("2.1602")] * 2


def test_unknown_contract_version_fails_every_location() -> None:
    plan = plan_chunk(KIND, [_doc()], {("RECIPE-FRUIT-CUP", 2): _contract()})
    [failure] = plan.failed_documents
    assert failure.reason == "unknown_contract_version"
    assert [line.line_ref for line in failure.lines] == ["LOC-BOSTON", "LOC-DENVER"]


# --- validation: batches and documents --------------------------------------------------------


def _batch_json(**over: Any) -> str:
    return json.dumps({"kind": "recipe_cost", "documents": [_doc_dict(**over)]})


def _batch_errors(text: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        BATCH.validate_json(text)
    return [e["type"] for e in info.value.errors()]


def _doc_errors(**over: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        RecipeDocument.model_validate_json(json.dumps(_doc_dict(**over)))
    return [e["type"] for e in info.value.errors()]


def test_valid_recipe_batch_parses_through_the_registry_adapter() -> None:
    batch = BATCH.validate_json(_batch_json())
    assert isinstance(batch, RecipeBatch)
    [doc] = batch.documents
    assert doc.recipe_id == "RECIPE-FRUIT-CUP"
    assert doc.pricing_snapshot["APPLES-FRESH"] == Decimal("1.8541")
    assert doc.effective_at.utcoffset() is not None
    assert doc.trigger == "vendor_rate"


@pytest.mark.parametrize("effective_at", ["2026-07-01T06:00:00Z", "2026-07-01T06:00:00+00:00"])
def test_utc_effective_at_is_accepted(effective_at: str) -> None:
    batch = BATCH.validate_json(_batch_json(effective_at=effective_at))
    assert batch.documents[0].effective_at.isoformat() == "2026-07-01T06:00:00+00:00"


@pytest.mark.parametrize(
    "effective_at",
    ["2026-07-01T08:00:00+02:00", "2026-07-01T01:00:00-05:00", "2026-07-01T06:00:00"],
    ids=["plus_two_hours", "minus_five_hours", "naive"],
)
def test_non_utc_effective_at_is_refused(effective_at: str) -> None:
    # 08:00+02:00 is the same instant as 06:00Z, but the wire must say UTC.
    assert _batch_errors(_batch_json(effective_at=effective_at)) == ["datetime_invalid"]
    assert _doc_errors(effective_at=effective_at) == ["datetime_invalid"]


@pytest.mark.parametrize(
    "effective_at",
    [1782885600, 1782885600000, "1782885600", 1782885600.5, True, None, "2026-07-01"],
    ids=["number", "milliseconds", "digits", "fraction", "boolean", "null", "date-only"],
)
def test_unix_timestamp_effective_at_is_refused(effective_at: Any) -> None:
    # 1782885600 seconds after the epoch is 2026-07-01T06:00:00Z, but it is not ISO-8601
    assert _doc_errors(effective_at=effective_at) == ["datetime_invalid"]


@pytest.mark.regression(
    reason="was a BUG (issue 12 item 8): effective_at took any offset spelling that meant "
    "zero (-00:00, +0000) and fractions finer than a microsecond, which were cut"
)
@pytest.mark.parametrize(
    "effective_at",
    [
        "2026-07-01T06:00:00-00:00",  # RFC 3339: offset unknown
        "2026-07-01T06:00:00+0000",
        "2026-07-01T06:00:00.1234567Z",  # 100 ns: two such instants would be one
        "2026-07-01 06:00:00Z",
        "2026-07-01t06:00:00z",
        "2026-07-01T24:00:00Z",
        "2026-07-01T23:59:60Z",
        "2026-02-30T06:00:00Z",
        "2026-07-01T06:00:00+00:00:00",
    ],
)
def test_effective_at_is_iso_8601_written_in_utc_or_datetime_invalid(effective_at: str) -> None:
    assert _doc_errors(effective_at=effective_at) == ["datetime_invalid"]


@pytest.mark.parametrize(
    ("effective_at", "instant"),
    [
        ("2026-07-01T06:00Z", "2026-07-01T06:00:00+00:00"),
        ("2026-07-01T06:00:00.5Z", "2026-07-01T06:00:00.500000+00:00"),
        ("2026-07-01T06:00:00.123456+00:00", "2026-07-01T06:00:00.123456+00:00"),
    ],
)
def test_effective_at_with_or_without_seconds_and_fraction(effective_at: str, instant: str) -> None:
    doc = RecipeDocument.model_validate_json(json.dumps(_doc_dict(effective_at=effective_at)))
    assert doc.effective_at.isoformat() == instant


@pytest.mark.parametrize("trigger", ["vendor_rate", "yield_edit", "spec_change", "bulk_import"])
def test_each_spec_trigger_is_accepted(trigger: str) -> None:
    assert BATCH.validate_json(_batch_json(trigger=trigger)).documents[0].trigger == trigger


@pytest.mark.parametrize("trigger", ["manual", "VENDOR_RATE", ""])
def test_other_triggers_are_refused(trigger: str) -> None:
    assert _batch_errors(_batch_json(trigger=trigger)) == ["literal_error"]
    assert _doc_errors(trigger=trigger) == ["literal_error"]


def test_recipe_id_must_equal_partition_key() -> None:
    assert _batch_errors(_batch_json(recipe_id="RECIPE-OTHER")) == ["value_error"]
    assert _doc_errors(recipe_id="RECIPE-OTHER") == ["value_error"]


def test_duplicate_location_ids_are_found_for_the_front_door() -> None:
    # The front door answers duplicate_line (services/api/intake/ingest.py) from this.
    locations = ["LOC-A", "LOC-B", "LOC-A"]
    doc = RecipeDocument.model_validate_json(json.dumps(_doc_dict(location_ids=locations)))
    repeated = KIND.repeated_line(doc)
    assert repeated is not None and (repeated.loc, repeated.value) == (
        ("location_ids", "2"),
        "LOC-A",
    )


def test_location_ids_must_not_be_empty() -> None:
    assert _doc_errors(location_ids=[]) == ["too_short"]


def test_prices_as_json_numbers_are_refused() -> None:
    text = _batch_json().replace('"1.8541"', "1.8541")
    assert '"APPLES-FRESH": 1.8541' in text
    assert _batch_errors(text) == ["decimal_must_be_string"]
    assert _doc_errors(pricing_snapshot={"APPLES-FRESH": 1.8541}) == ["decimal_must_be_string"]


@pytest.mark.parametrize(
    ("price", "error_type"),
    [
        ("1.8541234", "decimal_out_of_range"),  # 7 places: quantities/rates hold at most 6
        ("1000000000000", "decimal_out_of_range"),  # 10^12 is not below 10^12
        ("NaN", "decimal_invalid"),
        ("1,85", "decimal_invalid"),
    ],
)
def test_out_of_range_or_malformed_prices_are_refused(price: str, error_type: str) -> None:
    assert _doc_errors(pricing_snapshot={"APPLES-FRESH": price}) == [error_type]


def test_extra_fields_are_refused() -> None:
    assert _batch_errors(_batch_json(store_id="S-1")) == ["extra_forbidden"]
    assert _doc_errors(store_id="S-1") == ["extra_forbidden"]


def test_extra_field_at_batch_level_is_refused() -> None:
    body = json.loads(_batch_json())
    body["priority"] = "high"
    assert _batch_errors(json.dumps(body)) == ["extra_forbidden"]


def test_one_bad_document_refuses_the_whole_batch() -> None:
    body = json.loads(_batch_json())
    bad = copy.deepcopy(body["documents"][0])
    bad["trigger"] = "manual"
    body["documents"].append(bad)
    assert _batch_errors(json.dumps(body)) == ["literal_error"]


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ('{"bom": {}}', "contract_invalid"),
        ('{"bom": {"APPLES-FRESH": 0.5}}', "decimal_must_be_string"),
        ('{"bom": {"APPLES-FRESH": "0.1234567"}}', "decimal_out_of_range"),
        ('{"bom": {"APPLES-FRESH": "0.5"}, "tolerance": "0"}', "extra_forbidden"),
    ],
)
def test_invalid_contract_bodies_are_refused(body: str, error_type: str) -> None:
    with pytest.raises(ValidationError) as info:
        RecipeContract.model_validate_json(body)
    assert [e["type"] for e in info.value.errors()] == [error_type]


def test_contract_body_from_the_spec_parses() -> None:
    contract = RecipeContract.model_validate_json('{"bom": {"SKU-A": "0.5"}}')
    assert contract.bom == {"SKU-A": Decimal("0.5")}


def test_ids_containing_separators_cannot_make_two_requests_one() -> None:
    # Joined with "," these two location sets would read the same: a,a,b,b
    one = _doc(location_ids=["a", "a,b", "b"])
    other = _doc(location_ids=["a", "a,b,b"])
    assert request_fingerprint(one) != request_fingerprint(other)


def test_negative_zero_price_is_the_same_price_as_zero() -> None:
    negative = _doc(pricing_snapshot={**USDA_2022, "X": "-0"})
    assert request_fingerprint(negative) == request_fingerprint(
        _doc(pricing_snapshot={**USDA_2022, "X": "0"})
    )


@given(
    local=st.datetimes(min_value=dt.datetime.min, max_value=dt.datetime.max),
    minutes=st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1),
)
def test_effective_at_over_the_whole_calendar_is_read_or_refused_never_an_error(
    local: dt.datetime, minutes: int
) -> None:
    # Issue 29 (G1): a time near either end of the calendar must not overflow
    # once converted to UTC; only UTC is taken, so nothing here can.
    text = local.replace(tzinfo=dt.timezone(dt.timedelta(minutes=minutes))).isoformat()
    if minutes:
        assert _doc_errors(effective_at=text) == ["datetime_invalid"]
        return
    doc = RecipeDocument.model_validate_json(json.dumps(_doc_dict(effective_at=text)))
    assert doc.effective_at == local.replace(tzinfo=dt.UTC)
    assert len(request_fingerprint(doc)) == 64
