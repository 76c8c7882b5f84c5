"""shared.domain.kinds.freight_audit: each leg audited against its rate contract
(docs/architecture.md#freight-audits).

    gross = rated_quantity * rates[rate_basis]
    net   = gross * (1 - discount_pct)
    model = net + fuel_surcharge * (net or gross, per fuel_basis) + sum(accessorials)

rounded once to 0.01 half up; posted when abs(billed - model) <= tolerance, else disputed.
The declared document_type is checked against the base64 raw_payload and a mislabel is noted.
"""

from __future__ import annotations

import base64
import hashlib
import json
from decimal import Decimal, localcontext
from typing import Any

import pytest
from pydantic import ValidationError

from shared.domain.kinds import BATCH, KINDS, get_kind
from shared.domain.kinds.base import Settlement
from shared.domain.kinds.freight_audit import (
    FreightAudit,
    FreightBatch,
    FreightContract,
    FreightDocument,
    Leg,
    PerMile,
    corrected_type,
    leg_charge,
    sniff_document_type,
)
from shared.domain.pipeline.settlement import plan_chunk
from shared.errors import BusinessError

KIND = FreightAudit()

# The contract body of docs/architecture.md#freight-audits.
SPEC_CONTRACT: dict[str, Any] = {
    "rate_per_mile": "2.150",
    "fuel_surcharge": "0.25",
    "accessorials": {"LIFTGATE": "75.00", "ENS": {"per": "mile", "rate": "0.1980"}},
    "tolerance": "1.00",
}

# The first bytes of two real X12 210 files in /work/shared/realdata/x12_210/ (the ISA segment):
# CN_FreightInvoiceSample1.txt starts with a UTF-8 BOM, 210-MGCTLYST-SAMPLE.EDI does not.
CN_ISA = (
    b"\xef\xbb\xbfISA*00*          *00*          *02*CN             *ZZ*RECEIVER ID    "
    b"*060628*0035*U*00401*000000340*0*P*>~\r\n"
)
MGCTLYST_ISA = (
    b"ISA*00*          *00*          *02*SCAC           *ZZ*MGCTLYST       "
    b"*160726*0528*U*00401*000001838*0*T*:~\n"
)
PDF_HEAD = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
XML_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n<FreightInvoice><ID>F-1</ID></FreightInvoice>'


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _contract(**over: Any) -> FreightContract:
    body = dict(SPEC_CONTRACT)
    body.update(over)
    return FreightContract.model_validate_json(json.dumps(body))


def _leg(**over: Any) -> dict[str, Any]:
    leg: dict[str, Any] = {
        "leg_no": 1,
        "miles": "412",
        "accessorials": ["LIFTGATE"],
        "billed_amount": "1182.25",
    }
    leg.update(over)
    return leg


def _doc_dict(*legs: dict[str, Any], **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "document_id": "FRT-2026-0007",
        "partition_key": "CARRIER-ODFL",
        "contract_version": 2,
        "document_type": "EDI",
        "legs": list(legs) or [_leg()],
    }
    doc.update(over)
    return doc


def _doc(*legs: dict[str, Any], **over: Any) -> FreightDocument:
    return FreightDocument.model_validate_json(json.dumps(_doc_dict(*legs, **over)))


def _settle(contract: FreightContract, **leg: Any) -> Settlement:
    doc = _doc(_leg(**leg))
    [line] = KIND.lines(doc)
    return KIND.settle(doc, line, contract)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- the default model, hand-worked ----------------------------------------------------------


def test_spec_default_model_miles_rate_fuel_and_a_flat_accessorial() -> None:
    # 412 miles * 2.150 = 885.80 gross = net (no discount)
    # fuel 0.25 * 885.80 = 221.45
    # LIFTGATE 75.00
    # model = 885.80 + 221.45 + 75.00 = 1182.25 (= 412 * 2.150 * 1.25 + 75.00)
    result = _settle(_contract(), billed_amount="1182.25")
    assert result == Settlement("posted", Decimal("1182.25"), Decimal("1182.25"), None)
    assert str(result.amount) == "1182.25"


def test_leg_charge_is_the_unrounded_model() -> None:
    # 250 * 2.1501 = 537.525; fuel 0.25 * 537.525 = 134.38125; total 671.90625 (unrounded)
    leg = Leg.model_validate_json(json.dumps(_leg(miles="250", accessorials=[])))
    assert leg_charge(leg, _contract(rate_per_mile="2.1501")) == Decimal("671.90625")


def test_rates_mile_is_the_same_as_rate_per_mile() -> None:
    contract = _contract(rate_per_mile=None, rates={"mile": "2.150"})
    # 412 * 2.150 * 1.25 + 75.00 = 1182.25, as with rate_per_mile
    assert _settle(contract).amount == Decimal("1182.25")
    assert contract.rate_for("mile") == Decimal("2.150")


def test_rate_per_mile_and_an_equal_rates_mile_may_both_be_given() -> None:
    # "2.15" and "2.150" are the same rate
    contract = _contract(rate_per_mile="2.15", rates={"mile": "2.150"})
    assert _settle(contract).amount == Decimal("1182.25")


# --- rate bases ------------------------------------------------------------------------------


def test_mile_rated_quantity_overrides_miles() -> None:
    # rated 400 (not the 412 driven): 400 * 2.150 = 860.00; * 1.25 = 1075.00; + 75.00 = 1150.00
    result = _settle(_contract(), rated_quantity="400", billed_amount="1150.00")
    assert result.amount == Decimal("1150.00")
    assert result.outcome == "posted"


def test_mile_basis_without_miles_uses_rated_quantity() -> None:
    # no miles; rated 100: 100 * 2.150 = 215.00; * 1.25 = 268.75; + 75.00 = 343.75
    contract = _contract()
    result = _settle(contract, miles=None, rated_quantity="100", billed_amount="343.75")
    assert result.amount == Decimal("343.75")


def test_per_mile_accessorial_is_rate_times_miles_not_rated_quantity() -> None:
    # miles 412, rated 400: linehaul 400 * 2.150 = 860.00; fuel 0.25 * 860.00 = 215.00
    # ENS 0.1980 * 412 miles = 81.576 (the driven miles, not the 400 rated)
    # model = 860.00 + 215.00 + 81.576 = 1156.576 -> 1156.58
    result = _settle(_contract(), rated_quantity="400", accessorials=["ENS"], billed_amount="0")
    assert result.amount == Decimal("1156.58")


def test_cwt_basis_rates_hundredweight() -> None:
    # 13.40 cwt * 41.93 = 561.862; no fuel, no discount -> 561.86
    contract = _contract(rates={"cwt": "41.93"}, fuel_surcharge="0", accessorials={})
    result = _settle(
        contract, rate_basis="cwt", rated_quantity="13.40", accessorials=[], billed_amount="561.86"
    )
    assert result.amount == Decimal("561.86")


def test_cwt_leg_without_rated_quantity_is_refused_at_validation() -> None:
    with pytest.raises(ValidationError) as info:
        Leg.model_validate_json(json.dumps(_leg(rate_basis="cwt")))
    assert [e["type"] for e in info.value.errors()] == ["value_error"]
    batch = json.dumps({"kind": "freight_audit", "documents": [_doc_dict(_leg(rate_basis="cwt"))]})
    with pytest.raises(ValidationError) as info:
        BATCH.validate_json(batch)
    assert [e["type"] for e in info.value.errors()] == ["value_error"]


def test_unit_basis_quantity_defaults_to_one() -> None:
    # 1 unit * 2510.00 = 2510.00 (no fuel)
    contract = _contract(rates={"unit": "2510.00"}, fuel_surcharge="0")
    result = _settle(contract, rate_basis="unit", miles=None, accessorials=[], billed_amount="0")
    assert result.amount == Decimal("2510.00")


def test_unit_basis_uses_rated_quantity_when_given() -> None:
    # 3 units * 2510.00 = 7530.00
    contract = _contract(rates={"unit": "2510.00"}, fuel_surcharge="0")
    result = _settle(contract, rate_basis="unit", rated_quantity="3", accessorials=[])
    assert result.amount == Decimal("7530.00")


def test_flat_basis_is_always_quantity_one() -> None:
    # flat 45.00 * 1; a rated_quantity of 7 is ignored for a flat rate; fuel 0.25 * 45 = 11.25
    # model = 45.00 + 11.25 = 56.25
    contract = _contract(rates={"flat": "45.00"})
    result = _settle(contract, rate_basis="flat", rated_quantity="7", accessorials=[])
    assert result.amount == Decimal("56.25")


def test_rate_for_each_basis_comes_from_rates() -> None:
    contract = _contract(rate_per_mile=None, rates={"cwt": "41.93", "flat": "45.00"})
    assert contract.rate_for("cwt") == Decimal("41.93")
    assert contract.rate_for("flat") == Decimal("45.00")
    assert contract.rate_for("mile") is None
    assert contract.rate_for("unit") is None


# --- discount and fuel basis -----------------------------------------------------------------


def test_discount_applies_to_gross_and_fuel_to_net_by_default() -> None:
    # gross 412 * 2.150 = 885.80; net = 885.80 * (1 - 0.80) = 177.16
    # fuel on net: 0.25 * 177.16 = 44.29; LIFTGATE 75.00 (never discounted)
    # model = 177.16 + 44.29 + 75.00 = 296.45
    result = _settle(_contract(discount_pct="0.80"), billed_amount="296.45")
    assert result.amount == Decimal("296.45")
    assert result.outcome == "posted"


def test_fuel_on_gross_when_fuel_basis_is_gross() -> None:
    # gross 885.80; net 177.16; fuel on gross: 0.25 * 885.80 = 221.45
    # model = 177.16 + 221.45 + 75.00 = 473.61
    result = _settle(_contract(discount_pct="0.80", fuel_basis="gross"), billed_amount="296.45")
    assert result.amount == Decimal("473.61")
    assert result.outcome == "disputed"


def test_without_discount_net_and_gross_fuel_agree() -> None:
    # no discount: net == gross == 885.80, so both bases give 1182.25
    assert _settle(_contract(fuel_basis="gross")).amount == Decimal("1182.25")
    assert _settle(_contract(fuel_basis="net")).amount == Decimal("1182.25")


def test_contract_defaults_no_discount_and_fuel_on_net() -> None:
    contract = FreightContract.model_validate_json('{"rate_per_mile": "2.15", "tolerance": "0"}')
    assert contract.discount_pct == Decimal(0)
    assert contract.fuel_surcharge == Decimal(0)
    assert contract.fuel_basis == "net"
    assert contract.accessorials == {}


# --- per-mile accessorials -------------------------------------------------------------------


def test_per_mile_accessorial_on_top_of_flat_ones() -> None:
    # 412 * 2.150 = 885.80; fuel 221.45; LIFTGATE 75.00; ENS 0.1980 * 412 = 81.576
    # model = 885.80 + 221.45 + 75.00 + 81.576 = 1263.826 -> 1263.83
    result = _settle(_contract(), accessorials=["LIFTGATE", "ENS"], billed_amount="1263.83")
    assert result.amount == Decimal("1263.83")
    assert result.outcome == "posted"


def test_repeated_accessorial_is_charged_each_time() -> None:
    # 885.80 + 221.45 + 2 * 75.00 = 1257.25
    assert _settle(_contract(), accessorials=["LIFTGATE", "LIFTGATE"]).amount == Decimal("1257.25")


def test_per_mile_accessorial_body_parses_as_per_mile() -> None:
    contract = _contract()
    assert contract.accessorials["ENS"] == PerMile(per="mile", rate=Decimal("0.1980"))
    assert contract.accessorials["LIFTGATE"] == Decimal("75.00")


# --- rounding once, half up ------------------------------------------------------------------


def test_tie_at_the_cent_rounds_half_up() -> None:
    # 250 miles * 2.1501 = 537.525, no fuel: a tie at the third place -> 537.53
    # (banker's rounding would give 537.52)
    contract = _contract(rate_per_mile="2.1501", fuel_surcharge="0")
    result = _settle(contract, miles="250", accessorials=[], billed_amount="537.53")
    assert result.amount == Decimal("537.53")


def test_rounding_once_differs_from_rounding_each_component() -> None:
    # 250 * 2.1501 = 537.525 net; fuel 0.20 * 537.525 = 107.505; total 645.030 -> 645.03
    # Rounding each component first: 537.53 + 107.51 = 645.04 (one cent too high).
    contract = _contract(rate_per_mile="2.1501", fuel_surcharge="0.20")
    result = _settle(contract, miles="250", accessorials=[], billed_amount="645.03")
    assert result.amount == Decimal("645.03")
    assert Decimal("537.53") + Decimal("107.51") == Decimal("645.04")


def test_sub_cent_components_add_up_before_rounding() -> None:
    # 1 mile * 100.0025 = 100.0025 (alone 100.00); ENS 0.0025 * 1 mile = 0.0025 (alone 0.00)
    # sum 100.005 -> a tie -> 100.01 (per-component rounding would give 100.00)
    contract = _contract(
        rate_per_mile="100.0025",
        fuel_surcharge="0",
        accessorials={"ENS": {"per": "mile", "rate": "0.0025"}},
    )
    result = _settle(contract, miles="1", accessorials=["ENS"], billed_amount="100.01")
    assert result.amount == Decimal("100.01")


def test_large_legal_values_are_still_rounded_exactly_once() -> None:
    # rated 5642362494.250005 (6 places, < 10^12) * 2.150001 = 12131085005.000005000005 gross
    # net = gross * (1 - 0.000001) = 12131072873.914999999999999995 exactly (30 digits)
    # -> 0.01 half up -> 12131072873.91; the 28-digit context first makes it ...73.915 -> .92
    contract = _contract(rate_per_mile="2.150001", fuel_surcharge="0", discount_pct="0.000001")
    with localcontext() as ctx:
        ctx.prec = 60
        gross = Decimal("5642362494.250005") * Decimal("2.150001")
        exact = gross * (1 - Decimal("0.000001"))
    assert exact == Decimal("12131072873.914999999999999995")
    result = _settle(
        contract,
        miles=None,
        rated_quantity="5642362494.250005",
        accessorials=[],
        billed_amount="12131072873.91",
    )
    assert result.amount == Decimal("12131072873.91")


# --- tolerance: the boundary is posted ---------------------------------------------------------


@pytest.mark.parametrize(
    ("billed", "outcome"),
    [
        # model 1182.25 (412 * 2.150 * 1.25 + 75.00), tolerance 1.00
        ("1182.25", "posted"),  # variance 0
        ("1183.25", "posted"),  # +1.00: exactly the tolerance
        ("1181.25", "posted"),  # -1.00: exactly the tolerance
        ("1183.26", "disputed"),  # +1.01: one cent more
        ("1181.24", "disputed"),  # -1.01: one cent more
        ("1183.2501", "disputed"),  # +1.0001
        ("1183.2499", "posted"),  # +0.9999
        ("0", "disputed"),
    ],
)
def test_tolerance_boundary_is_posted_one_cent_more_is_disputed(billed: str, outcome: str) -> None:
    result = _settle(_contract(), billed_amount=billed)
    assert result.outcome == outcome
    assert result.amount == Decimal("1182.25")
    assert result.claimed_amount == Decimal(billed)


def test_boundary_is_measured_against_the_rounded_model() -> None:
    # model 250 * 2.1501 = 537.525 -> 537.53; tolerance 0.05
    # billed 537.48: |537.48 - 537.53| = 0.05 -> posted (against 537.525 it would be 0.045)
    # billed 537.58: |537.58 - 537.53| = 0.05 -> posted (against 537.525 it would be 0.055)
    contract = _contract(rate_per_mile="2.1501", fuel_surcharge="0", tolerance="0.05")
    assert _settle(contract, miles="250", accessorials=[], billed_amount="537.48").outcome == (
        "posted"
    )
    assert _settle(contract, miles="250", accessorials=[], billed_amount="537.58").outcome == (
        "posted"
    )
    assert _settle(contract, miles="250", accessorials=[], billed_amount="537.59").outcome == (
        "disputed"
    )


def test_zero_tolerance_posts_only_an_exact_match() -> None:
    contract = _contract(tolerance="0")
    assert _settle(contract, billed_amount="1182.25").outcome == "posted"
    assert _settle(contract, billed_amount="1182.26").outcome == "disputed"


# --- line-level business errors --------------------------------------------------------------


def _reason(contract: FreightContract, **leg: Any) -> str:
    with pytest.raises(BusinessError) as info:
        _settle(contract, **leg)
    return info.value.reason


def test_unknown_accessorial_is_a_business_error_never_zero() -> None:
    assert _reason(_contract(), accessorials=["INSIDE-DELIVERY"]) == "unknown_accessorial"
    assert _reason(_contract(), accessorials=["liftgate"]) == "unknown_accessorial"


def test_basis_without_a_rate_in_the_contract_is_unknown_rate_basis() -> None:
    # the SPEC contract has only a mile rate
    assert _reason(_contract(), rate_basis="cwt", rated_quantity="10") == "unknown_rate_basis"
    assert _reason(_contract(), rate_basis="unit") == "unknown_rate_basis"
    assert _reason(_contract(), rate_basis="flat") == "unknown_rate_basis"
    # a rates-only contract without a mile rate: the default basis has no rate
    assert _reason(_contract(rate_per_mile=None, rates={"cwt": "41.93"})) == "unknown_rate_basis"


def test_per_mile_accessorial_without_miles_is_missing_quantity() -> None:
    contract = _contract(rates={"unit": "2510.00"})
    reason = _reason(contract, rate_basis="unit", miles=None, accessorials=["ENS"])
    assert reason == "missing_quantity"


def test_mile_basis_without_miles_or_rated_quantity_is_missing_quantity() -> None:
    assert _reason(_contract(), miles=None) == "missing_quantity"


@pytest.mark.parametrize(
    "leg",
    [
        {"miles": "-1"},
        {"rated_quantity": "-0.5"},
        {"rate_basis": "cwt", "rated_quantity": "-13.40"},
    ],
)
def test_negative_rated_quantity_is_negative_quantity(leg: dict[str, Any]) -> None:
    contract = _contract(rates={"cwt": "41.93"})
    assert _reason(contract, **leg) == "negative_quantity"


def test_negative_miles_under_a_per_mile_accessorial_is_negative_quantity() -> None:
    # cwt leg 10 * 41.93 = 419.30; ENS 0.1980 * -100 miles = -19.80 credit instead of an error
    contract = _contract(rates={"cwt": "41.93"})
    leg = {"rate_basis": "cwt", "rated_quantity": "10", "miles": "-100", "accessorials": ["ENS"]}
    assert _reason(contract, **leg) == "negative_quantity"


def test_line_errors_dead_letter_only_their_leg_through_plan_chunk() -> None:
    doc = _doc(
        # 412 * 2.150 * 1.25 + 75.00 = 1182.25 -> posted
        _leg(leg_no=1),
        _leg(leg_no=2, accessorials=["INSIDE-DELIVERY"]),
        _leg(leg_no=3, rate_basis="cwt", rated_quantity="13.40", accessorials=[]),
        # mile basis rated by rated_quantity, but ENS needs the driven miles
        _leg(leg_no=4, miles=None, rated_quantity="400", accessorials=["ENS"]),
        _leg(leg_no=5, miles=None, accessorials=[]),
        # 100 * 2.150 * 1.25 = 268.75; billed 300.00: |31.25| > 1.00 -> disputed
        _leg(leg_no=6, miles="100", accessorials=[], billed_amount="300.00"),
    )
    plan = plan_chunk(KIND, [doc], {("CARRIER-ODFL", 2): _contract()})

    assert plan.failed_documents == []
    got = {
        p.line.line_ref: (p.reason, p.settlement and (p.settlement.outcome, p.settlement.amount))
        for p in plan.lines
    }
    assert got == {
        "1": (None, ("posted", Decimal("1182.25"))),
        "2": ("unknown_accessorial", None),
        "3": ("unknown_rate_basis", None),
        "4": ("missing_quantity", None),
        "5": ("missing_quantity", None),
        "6": (None, ("disputed", Decimal("268.75"))),
    }
    assert all(p.message for p in plan.lines if p.reason is not None)
    keys = {p.line.line_ref: p.line.reconciliation_key for p in plan.lines}
    assert plan.claim_keys() == sorted([(keys["1"], 2), (keys["6"], 2)])


def test_unknown_contract_version_dead_letters_every_leg() -> None:
    doc = _doc(_leg(leg_no=1), _leg(leg_no=2))
    plan = plan_chunk(KIND, [doc], {("CARRIER-ODFL", 1): _contract()})
    assert plan.lines == []
    [failure] = plan.failed_documents
    assert failure.reason == "unknown_contract_version"
    assert [line.line_ref for line in failure.lines] == ["1", "2"]


# --- contract validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ({"tolerance": "1.00"}, "contract_invalid"),  # neither rate_per_mile nor rates
        ({"rates": {}, "tolerance": "1.00"}, "contract_invalid"),
        ({"rate_per_mile": "2.15", "rates": {"mile": "2.16"}, "tolerance": "1"}, "value_error"),
        ({"rates": {"km": "1.30"}, "tolerance": "1.00"}, "literal_error"),
        ({"rate_per_mile": 2.15, "tolerance": "1.00"}, "decimal_must_be_string"),
        ({"rate_per_mile": "2.1500001", "tolerance": "1.00"}, "decimal_out_of_range"),
        ({"rate_per_mile": "2.15", "tolerance": "1.00001"}, "decimal_out_of_range"),
        ({"rate_per_mile": "2.15", "tolerance": "1", "fuel_basis": "total"}, "literal_error"),
        ({"rate_per_mile": "2.15", "tolerance": "1", "vat": "0.20"}, "extra_forbidden"),
        ({"rate_per_mile": "2.15", "tolerance": "1", "currency": "usd"}, "string_pattern_mismatch"),
        ({"rate_per_mile": "2.15"}, "missing"),
    ],
)
def test_invalid_contract_bodies_are_refused(body: dict[str, Any], error_type: str) -> None:
    with pytest.raises(ValidationError) as info:
        FreightContract.model_validate_json(json.dumps(body))
    assert [e["type"] for e in info.value.errors()] == [error_type]


def test_accessorial_must_be_a_price_string_or_a_per_mile_rate() -> None:
    for price in (75, {"per": "km", "rate": "0.10"}, {"per": "mile", "rate": 0.1}):
        with pytest.raises(ValidationError):
            _contract(accessorials={"X": price})


def test_contract_body_from_the_spec_parses() -> None:
    body = dict(
        SPEC_CONTRACT,
        rates={"mile": "2.150", "cwt": "41.93", "unit": "2510.00", "flat": "45.00"},
        discount_pct="0.80",
        fuel_basis="gross",
    )
    contract = FreightContract.model_validate_json(json.dumps(body))
    assert contract.rate_for("mile") == Decimal("2.150")
    assert contract.rate_for("cwt") == Decimal("41.93")
    assert contract.rate_for("unit") == Decimal("2510.00")
    assert contract.rate_for("flat") == Decimal("45.00")
    assert contract.discount_pct == Decimal("0.80")
    assert contract.fuel_basis == "gross"


# --- document validation ---------------------------------------------------------------------


def _doc_errors(*legs: dict[str, Any], **over: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        FreightDocument.model_validate_json(json.dumps(_doc_dict(*legs, **over)))
    return [e["type"] for e in info.value.errors()]


def test_valid_freight_batch_parses_through_the_registry_adapter() -> None:
    body = {"kind": "freight_audit", "documents": [_doc_dict(raw_payload=_b64(MGCTLYST_ISA))]}
    batch = BATCH.validate_json(json.dumps(body))
    assert isinstance(batch, FreightBatch)
    [doc] = batch.documents
    assert doc.legs[0].miles == Decimal("412")
    assert doc.legs[0].rate_basis is None
    assert doc.legs[0].billed_amount == Decimal("1182.25")


@pytest.mark.parametrize(
    ("over", "error_type"),
    [
        ({"miles": 412}, "decimal_must_be_string"),
        ({"billed_amount": 1182.25}, "decimal_must_be_string"),
        ({"billed_amount": "1182.25001"}, "decimal_out_of_range"),  # money: 4 places at most
        ({"rated_quantity": "1.0000001"}, "decimal_out_of_range"),  # quantity: 6 places at most
        ({"miles": "1000000000000"}, "decimal_out_of_range"),  # not below 10^12
        ({"rate_basis": "km"}, "literal_error"),
        ({"leg_no": 0}, "greater_than_equal"),
        ({"fuel": "0.25"}, "extra_forbidden"),
    ],
)
def test_invalid_legs_are_refused(over: dict[str, Any], error_type: str) -> None:
    assert _doc_errors(_leg(**over)) == [error_type]


def test_repeated_leg_numbers_are_found_for_the_front_door() -> None:
    # The front door answers duplicate_line (services/api/intake/ingest.py) from this.
    repeated = KIND.repeated_line(_doc(_leg(leg_no=1), _leg(leg_no=2), _leg(leg_no=1)))
    assert repeated is not None
    assert (repeated.field, repeated.loc, repeated.value) == (
        "leg_no",
        ("legs", "2", "leg_no"),
        "1",
    )
    assert KIND.repeated_line(_doc(_leg(leg_no=1), _leg(leg_no=2))) is None


@pytest.mark.parametrize("document_type", ["pdf", "CSV", ""])
def test_unknown_document_type_is_refused(document_type: str) -> None:
    assert _doc_errors(document_type=document_type) == ["literal_error"]


@pytest.mark.parametrize("payload", ["not base64!", "QU=JD", "QUJ", "SVNB\nKjAw", "SVNB-_8"])
def test_invalid_base64_raw_payload_is_refused(payload: str) -> None:
    assert _doc_errors(raw_payload=payload) == ["value_error"]
    body = {"kind": "freight_audit", "documents": [_doc_dict(raw_payload=payload)]}
    with pytest.raises(ValidationError):
        BATCH.validate_json(json.dumps(body))


# --- document_type sniffing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "sniffed"),
    [
        (PDF_HEAD, "PDF"),
        (MGCTLYST_ISA, "EDI"),
        (CN_ISA, "EDI"),  # UTF-8 BOM before ISA
        (b"  \r\n\tISA*00*", "EDI"),  # leading whitespace
        (b"\xef\xbb\xbf\n  ISA*00*", "EDI"),  # BOM then whitespace
        (XML_HEAD, "XML"),
        (b"<FreightInvoice/>", "XML"),
        (b"\xef\xbb\xbf<?xml version='1.0'?><a/>", "XML"),
        (b"B3**09851270*75027674", None),  # an X12 body without its envelope
        (b"hello", None),
        (b"", None),
    ],
)
def test_sniff_document_type(raw: bytes, sniffed: str | None) -> None:
    assert sniff_document_type(raw) == sniffed


@pytest.mark.parametrize(
    ("declared", "raw", "corrected"),
    [
        ("PDF", CN_ISA, "EDI"),
        ("XML", MGCTLYST_ISA, "EDI"),
        ("EDI", PDF_HEAD, "PDF"),
        ("EDI", XML_HEAD, "XML"),
        ("PDF", XML_HEAD, "XML"),
    ],
)
def test_mislabelled_document_is_corrected_and_noted(
    declared: str, raw: bytes, corrected: str
) -> None:
    doc = _doc(_leg(), document_type=declared, raw_payload=_b64(raw))
    assert corrected_type(doc) == corrected
    [line] = KIND.lines(doc)
    result = KIND.settle(doc, line, _contract())
    # the label does not change the numbers: 1182.25 billed = 1182.25 model -> posted
    assert result == Settlement(
        "posted", Decimal("1182.25"), Decimal("1182.25"), "document_type_corrected"
    )


def test_mislabel_note_is_kept_on_a_disputed_leg() -> None:
    doc = _doc(_leg(billed_amount="1500.00"), document_type="PDF", raw_payload=_b64(CN_ISA))
    [line] = KIND.lines(doc)
    result = KIND.settle(doc, line, _contract())
    # |1500.00 - 1182.25| = 317.75 > 1.00 -> disputed, still noted
    assert result.outcome == "disputed"
    assert result.note == "document_type_corrected"


@pytest.mark.parametrize(
    ("declared", "raw"),
    [("EDI", CN_ISA), ("PDF", PDF_HEAD), ("XML", XML_HEAD), ("PDF", b"plain text"), ("XML", b"")],
)
def test_correct_or_unrecognised_label_has_no_note(declared: str, raw: bytes) -> None:
    doc = _doc(_leg(), document_type=declared, raw_payload=_b64(raw))
    [line] = KIND.lines(doc)
    assert corrected_type(doc) is None
    assert KIND.settle(doc, line, _contract()).note is None


def test_no_raw_payload_has_no_note() -> None:
    doc = _doc(_leg(), document_type="PDF")
    [line] = KIND.lines(doc)
    assert corrected_type(doc) is None
    assert KIND.settle(doc, line, _contract()).note is None


def test_sniffing_reads_a_long_payload_by_its_head() -> None:
    # 100 KiB of segments after the ISA: only the head is decoded and it says EDI
    raw = MGCTLYST_ISA + b"LX*1~L1*1*46.09*PH*363604~\n" * 4000
    doc = _doc(_leg(), document_type="XML", raw_payload=_b64(raw))
    assert corrected_type(doc) == "EDI"


# --- keys ------------------------------------------------------------------------------------


def test_reconciliation_key_is_carrier_document_and_leg_recomputed_by_hand() -> None:
    doc = _doc(_leg(leg_no=1), _leg(leg_no=12, billed_amount="10.00"))
    first, second = KIND.lines(doc)
    assert first.reconciliation_key == _sha("CARRIER-ODFL|FRT-2026-0007|1")
    assert second.reconciliation_key == _sha("CARRIER-ODFL|FRT-2026-0007|12")
    assert first.reconciliation_key == (hashlib.sha256(b"CARRIER-ODFL|FRT-2026-0007|1").hexdigest())
    assert (first.line_ref, second.line_ref) == ("1", "12")
    assert (first.claimed_amount, second.claimed_amount) == (Decimal("1182.25"), Decimal("10.00"))
    assert first.document_id == "FRT-2026-0007"
    assert isinstance(first.raw, Leg)
    assert KIND.line_count(doc) == 2


def test_key_ignores_amounts_labels_and_payload() -> None:
    [a] = KIND.lines(_doc(_leg()))
    [b] = KIND.lines(
        _doc(_leg(billed_amount="9.99", miles="1"), document_type="PDF", raw_payload=_b64(b"x"))
    )
    assert a.reconciliation_key == b.reconciliation_key


def test_key_changes_with_carrier_document_or_leg() -> None:
    [base] = KIND.lines(_doc())
    [carrier] = KIND.lines(_doc(partition_key="CARRIER-XPO"))
    [document] = KIND.lines(_doc(document_id="FRT-2026-0008"))
    [leg] = KIND.lines(_doc(_leg(leg_no=2)))
    keys = {base.reconciliation_key, carrier.reconciliation_key}
    keys |= {document.reconciliation_key, leg.reconciliation_key}
    assert len(keys) == 4


def test_kind_metadata_and_registry() -> None:
    assert KIND.name == "freight_audit"
    assert "freight_audit" in KINDS
    assert isinstance(get_kind("freight_audit"), FreightAudit)
    assert KIND.document_model is FreightDocument
    assert KIND.contract_model is FreightContract
    assert KIND.batch_model is FreightBatch
    assert KIND.delta_basis == "key_versions"


# --- real X12 210 carrier invoices, reproduced by hand ---------------------------------------
# Files in /work/shared/realdata/x12_210/. Monetary L1-04 / L3-05 values are implied-decimal
# (N2): 363604 = 3636.04. Only the numbers are copied here.


def _audit(contract: dict[str, Any], leg: dict[str, Any]) -> Settlement:
    doc = _doc(leg, document_type="EDI")
    [line] = KIND.lines(doc)
    return KIND.settle(doc, line, FreightContract.model_validate_json(json.dumps(contract)))


MGCTLYST_CONTRACT = {
    "rates": {"cwt": "46.09"},
    "discount_pct": "0.83",
    "fuel_surcharge": "0.0425",
    "accessorials": {"CUS": "15.00"},
    "tolerance": "0.00",
}
MGCTLYST_LEG = {
    "leg_no": 1,
    "rate_basis": "cwt",
    "rated_quantity": "78.89",
    "accessorials": ["CUS"],
    "billed_amount": "659.40",
}


def test_invoice_mgctlyst_cwt_with_83_percent_discount_fuel_and_customs() -> None:
    # 210-MGCTLYST-SAMPLE.EDI (Catalyst Paper, LTL):
    #   L0*1***7889*G***3*PCS          weight 7889 lb = 78.89 cwt, 3 pieces
    #   L1*1*46.09*PH*363604           46.09 per hundredweight -> 3636.04
    #   L1*2***1500****CUS             CUS 15.00
    #   L5*3*FUEL SUR CHG  00.72%      L1*3*26.27*FR*2627****FUE  fuel 26.27
    #   L1*4***-301791****DSC          discount -3017.91
    #   L3*7889*G***65940              total 659.40 (B3 also 65940)
    # Derived: 3017.91 / 3636.04 = 83% discount; 26.27 / (3636.04 - 3017.91) = 4.25% on net.
    # gross = 78.89 * 46.09             = 3636.0401      (invoice 3636.04)
    # discount 3636.0401 * 0.83         = 3017.913283    (invoice -3017.91)
    # net   = 3636.0401 * (1 - 0.83)    = 618.126817
    # fuel  = 0.0425 * 618.126817       = 26.2703897225  (invoice 26.27)
    # model = 618.126817 + 26.2703897225 + 15.00 = 659.3972067225 -> 659.40 = L3 total
    result = _audit(MGCTLYST_CONTRACT, MGCTLYST_LEG)
    assert result.amount == Decimal("659.40")
    assert result.outcome == "posted"  # with a zero tolerance: an exact reproduction


def test_invoice_mgctlyst_fuel_expressed_on_gross_gives_the_same_total() -> None:
    # The printed "00.72%" is fuel on gross: 4.25% of net = 0.0425 * 0.17 = 0.7225% of gross.
    # fuel = 0.007225 * 3636.0401 = 26.2703897225 (identical to the net form)
    # model = 618.126817 + 26.2703897225 + 15.00 = 659.3972067225 -> 659.40
    contract = dict(MGCTLYST_CONTRACT, fuel_surcharge="0.007225", fuel_basis="gross")
    assert _audit(contract, MGCTLYST_LEG).amount == Decimal("659.40")


def test_invoice_mgctlyst_with_the_printed_rounded_fuel_percentage_is_disputed() -> None:
    # Taking the L5 text literally (0.72% of gross) is 9 cents short of what was billed:
    # fuel = 0.0072 * 3636.0401 = 26.17948872
    # model = 618.126817 + 26.17948872 + 15.00 = 659.30630572 -> 659.31
    # |659.40 - 659.31| = 0.09 > 0.05 -> disputed; within a 0.10 tolerance -> posted
    contract = dict(MGCTLYST_CONTRACT, fuel_surcharge="0.0072", fuel_basis="gross")
    strict = _audit(dict(contract, tolerance="0.05"), MGCTLYST_LEG)
    assert (strict.amount, strict.outcome) == (Decimal("659.31"), "disputed")
    assert _audit(dict(contract, tolerance="0.10"), MGCTLYST_LEG).outcome == "posted"


XPO_CONTRACT = {
    "rates": {"cwt": "41.93"},
    "discount_pct": "0.80",
    "fuel_surcharge": "0.105",
    "tolerance": "0.00",
}
XPO_LEG = {"leg_no": 1, "rate_basis": "cwt", "rated_quantity": "13.40", "billed_amount": "124.17"}


def test_invoice_ts210_80char_xpo_discount_and_fuel_on_net() -> None:
    # ts210_80char.edi (XPO-style LTL, wrapped at 80 columns):
    #   L0*1***1340*G***1*PLT          1340 lb = 13.40 cwt, 1 pallet
    #   L1*1*41.93*PH*56186            41.93 per hundredweight -> 561.86
    #   L1*2***-44949****DSC           XPO LOGISTICS DISCOUNT -449.49
    #   L5*3*FSC FUEL SURCHARGE 10.50% L1*3*11.8*FR*1180****FUE  fuel 11.80
    #   L3*1340*G***12417              total 124.17 (B3 also 12417)
    # gross = 13.40 * 41.93            = 561.862         (invoice 561.86)
    # discount 561.862 * 0.80          = 449.4896        (invoice -449.49)
    # net   = 561.862 * (1 - 0.80)     = 112.3724
    # fuel  = 0.105 * 112.3724         = 11.799102       (invoice 11.80)
    # model = 112.3724 + 11.799102     = 124.171502 -> 124.17 = L3 total
    result = _audit(XPO_CONTRACT, XPO_LEG)
    assert result.amount == Decimal("124.17")
    assert result.outcome == "posted"


def test_invoice_ts210_80char_audited_with_fuel_on_gross_is_disputed() -> None:
    # The same invoice against a contract that charges fuel on gross:
    # fuel = 0.105 * 561.862 = 58.99551; model = 112.3724 + 58.99551 = 171.36791 -> 171.37
    # |124.17 - 171.37| = 47.20 > 1.00 -> disputed
    contract = dict(XPO_CONTRACT, fuel_basis="gross", tolerance="1.00")
    result = _audit(contract, XPO_LEG)
    assert (result.amount, result.outcome) == (Decimal("171.37"), "disputed")


def test_invoice_cn_sample1_per_car_rate_and_per_mile_energy_surcharge() -> None:
    # CN_FreightInvoiceSample1.txt (Canadian National rail, one tank car):
    #   L0*1***187000*N***1*TKR                   187000 lb, 1 tank car
    #   L1*1*2510*PC*251000                       2510 per car -> 2510.00
    #   L1*1*0.1980*PM*24433****ENS...*1234*MR    ENS 0.1980 per mile, 1234 miles -> 244.33
    #   L3*187000*N***275433                      total 2754.33 (B3 also 275433)
    # gross = 1 car (unit default) * 2510.00 = 2510.00 (no discount, no fuel percentage)
    # ENS   = 0.1980 * 1234 miles           = 244.3320 (invoice 244.33)
    # model = 2510.00 + 244.3320            = 2754.332 -> 2754.33 = L3 total
    contract = {
        "rates": {"unit": "2510.00"},
        "accessorials": {"ENS": {"per": "mile", "rate": "0.1980"}},
        "tolerance": "0.00",
    }
    leg = {
        "leg_no": 1,
        "rate_basis": "unit",
        "miles": "1234",
        "accessorials": ["ENS"],
        "billed_amount": "2754.33",
    }
    result = _audit(contract, leg)
    assert result.amount == Decimal("2754.33")
    assert result.outcome == "posted"


def test_invoice_db_schenker_flat_charge_with_fuel() -> None:
    # DBSchenker_SampleMotorFreightDetailsAndInvoice.txt ("." terminates segments):
    #   L1****4500****490                        charge 45.00 (no rate printed: flat)
    #   L1****140****405****FUEL SURCHARGE       fuel 1.40
    #   L3*36*G***4640                           36 lb, total 46.40 (B3 also 4640)
    # No fuel percentage is printed; 1.40 / 45.00 = 3.111...%. With 3.11%:
    # gross = 1 * 45.00 = 45.00; fuel = 0.0311 * 45.00 = 1.3995
    # model = 45.00 + 1.3995 = 46.3995 -> 46.40 = L3 total (half up at the third place: 9 >= 5)
    contract = {"rates": {"flat": "45.00"}, "fuel_surcharge": "0.0311", "tolerance": "0.00"}
    leg = {"leg_no": 1, "rate_basis": "flat", "billed_amount": "46.40"}
    result = _audit(contract, leg)
    assert result.amount == Decimal("46.40")
    assert result.outcome == "posted"


def test_invoice_nlmi_truckload_flat_rate_ignores_the_rated_quantity() -> None:
    # FreightInvoice.txt (Siemens VDO -> Brampton Assembly, carrier NLMI, truckload):
    #   L0*1*1499*FR*1499*G                      billed/rated quantity 1499, weight 1499 lb
    #   L1*1*51.65*FR*5165****400                flat rate 51.65 -> 51.65
    #   L3*2619*G***5165                         total 51.65 (B3 also 5165; L3 weight differs)
    # flat basis: quantity is always 1 -> 1 * 51.65 = 51.65, the 1499 is not multiplied in
    contract = {"rates": {"flat": "51.65"}, "tolerance": "0.00"}
    leg = {"leg_no": 1, "rate_basis": "flat", "rated_quantity": "1499", "billed_amount": "51.65"}
    result = _audit(contract, leg)
    assert result.amount == Decimal("51.65")
    assert result.outcome == "posted"


def test_invoice_cn_sample2_gst_cannot_be_reproduced_and_is_disputed() -> None:
    # CN_FreightInvoiceSample2.txt (CN rail, CAD):
    #   L1*1*1705*PU*170500                      1705 per unit -> 1705.00
    #   L1*1*0.1980*PM*24433****ENS...*1234*MR   ENS 0.1980 * 1234 miles -> 244.33
    #   L1*1*.07*CT*13427****GST                 GST 7% -> 134.27
    #   L3*36986*N***208360                      total 2083.60 = 1705.00 + 244.33 + 134.27
    # The GST base is not on the invoice: 134.27 / 0.07 = 1918.14..., which is neither
    # 1705.00 (-> 119.35) nor 1705.00 + 244.33 = 1949.33 (-> 136.45). The SPEC model has no
    # tax; the nearest is a 7% "fuel" on gross, which gives
    #   fuel  = 0.07 * 1705.00 = 119.35
    #   model = 1705.00 + 119.35 + 0.1980 * 1234 (244.332) = 2068.682 -> 2068.68
    #   |2083.60 - 2068.68| = 14.92: disputed at a 1.00 tolerance (a human must look at tax),
    # posted only with a tolerance of 15.00 or more, which would hide real overbilling.
    contract = {
        "rates": {"unit": "1705.00"},
        "fuel_surcharge": "0.07",
        "fuel_basis": "gross",
        "accessorials": {"ENS": {"per": "mile", "rate": "0.1980"}},
        "tolerance": "1.00",
    }
    leg = {
        "leg_no": 1,
        "rate_basis": "unit",
        "miles": "1234",
        "accessorials": ["ENS"],
        "billed_amount": "2083.60",
    }
    result = _audit(contract, leg)
    assert (result.amount, result.outcome) == (Decimal("2068.68"), "disputed")
    assert _audit(dict(contract, tolerance="15.00"), leg).outcome == "posted"
