"""210 → freight_audit (docs/architecture.md#edi-intake): one leg per ST, each value from
where the table says, each refusal at its segment and element."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from shared.domain.kinds.freight_audit import FreightDocument
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused, Mapped, Problem
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import fast_and_slow_agree, freight, x12


def _map(body: list[str], **query: Any) -> Mapped:
    interchanges = read_file(x12([("210", "0001", body)]))
    fast_and_slow_agree(interchanges, query.get("contract_version", 4))
    mapped = map_file(
        interchanges,
        contract_version=query.get("contract_version", 4),
        partition_key=None,
        period=None,
    )
    for document in mapped.documents:
        FreightDocument.model_validate(document)
    return mapped


def _leg(body: list[str]) -> dict[str, Any]:
    [document] = _map(body).documents
    [leg] = document["legs"]
    return leg  # type: ignore[no-any-return]


def _problems(body: list[str]) -> list[Problem]:
    with pytest.raises(EdiRefused) as caught:
        _map(body)
    assert caught.value.interchanges is not None
    return caught.value.problems


def _problem(body: list[str]) -> tuple[str, str | None, int | None]:
    problem = _problems(body)[0]
    assert problem.control_number == "0001"
    return problem.code, problem.tag, problem.element


def _simple(linehaul: str, *more: str, l0: str = "L0*1***7889*G***3*PCS") -> list[str]:
    """B3, one lading line and ``linehaul`` (its L1-04 10000, 100.00) plus ``more`` L1s,
    with B3-07 and L3-05 their sum."""
    lines = [linehaul, *more]
    total = sum(int(line.split("*")[4] or 0) for line in lines)
    return [
        f"B3**INV-9*1*PP**20260105*{total}**20260106*035*ABCD",
        "LX*1",
        *([l0] if l0 else []),
        *lines,
        f"L3*7889*G***{total}",
    ]


def test_the_mgctlyst_like_invoice_maps_field_by_field() -> None:
    [document] = _map(freight()).documents
    assert {k: v for k, v in document.items() if k not in ("raw_payload", "legs")} == {
        "document_id": "INV-1",
        "partition_key": "SCAC",
        "contract_version": 4,
        "correlation_id": "x12:SENDER:000000001:1:0001",
        "document_type": "EDI",
    }
    assert document["legs"] == [
        {
            "leg_no": 1,
            "rate_basis": "cwt",
            "rated_quantity": "78.89",  # L0-04 7889 lb / 100
            "accessorials": ["CUS"],  # not FUE, not DSC
            "billed_amount": "659.40",  # 3636.04 + 15.00 + 26.27 - 3017.91
        }
    ]
    raw = base64.b64decode(document["raw_payload"])
    assert raw.startswith(b"ST*210*0001~\nB3**INV-1") and raw.endswith(b"SE*13*0001~")


@pytest.mark.parametrize(
    ("qualifier", "basis", "quantity"),
    [
        ("PH", "cwt", "78.89"),
        ("CW", "cwt", "78.89"),
        ("FR", "flat", "1"),
        ("FC", "flat", "1"),
        ("LS", "flat", "1"),
        ("PS", "flat", "1"),
        ("PL", "flat", "1"),
        ("PU", "unit", "3"),  # L0-08
        ("PC", "unit", "3"),
        ("PP", "unit", "3"),
        ("PA", "unit", "3"),
    ],
)
def test_the_linehauls_rate_qualifier_gives_the_basis(
    qualifier: str, basis: str, quantity: str
) -> None:
    leg = _leg(_simple(f"L1*1*10*{qualifier}*10000"))
    assert (leg["rate_basis"], leg["rated_quantity"]) == (basis, quantity)
    assert "miles" not in leg


@pytest.mark.parametrize("qualifier", ["PM", "MB"])
@pytest.mark.parametrize("unit", ["DM", "MR", "HG", "QP", "QS", "DD"])
def test_per_mile_linehauls_rate_the_miles(qualifier: str, unit: str) -> None:
    leg = _leg(_simple(f"L1*1*2.15*{qualifier}*10000*************412*{unit}"))
    assert (leg["rate_basis"], leg["rated_quantity"], leg["miles"]) == ("mile", "412", "412")


def test_miles_come_from_l0_when_no_l1_has_them() -> None:
    leg = _leg(_simple("L1*1*2.15*PM*10000", l0="L0*1*412.5*DM*7889*G***3*PCS"))
    assert (leg["miles"], leg["rated_quantity"]) == ("412.5", "412.5")
    # An L1's miles win over an L0's.
    leg = _leg(_simple("L1*1*2.15*PM*10000*************400*DM", l0="L0*1*412*DM"))
    assert leg["miles"] == "400"


def test_miles_that_disagree_or_are_kilometres_are_unmappable() -> None:
    two = _simple("L1*1*10*FR*10000*************400*DM", "L1*2*1*PM*500****ENS*********401*MR")
    assert _problem(two) == ("edi_unmappable", "L1", 17)
    same = _simple("L1*1*10*FR*10000*************400*DM", "L1*2*1*PM*500****ENS*********400.0*MR")
    assert _leg(same)["miles"] == "400"
    assert _problem(_simple("L1*1*10*FR*10000*************400*DK")) == ("edi_unmappable", "L1", 18)
    assert _problem(_simple("L1*1*10*FR*10000", l0="L0*1*400*KM")) == ("edi_unmappable", "L0", 3)


def test_a_per_mile_linehaul_needs_miles() -> None:
    assert _problem(_simple("L1*1*2.15*PM*10000")) == ("edi_unmappable", "L1", 3)


def test_one_linehaul_exactly() -> None:
    assert _problem(_simple("L1*1*10*FR*10000****CUS")) == ("edi_unmappable", "ST", None)
    assert _problem(_simple("L1*1*10*FR*10000", "L1*2*10*FR*10000****400")) == (
        "edi_unmappable",
        "L1",
        None,
    )


def test_an_unknown_rate_qualifier_is_unmappable() -> None:
    assert _problem(_simple("L1*1*10*ZZ*10000")) == ("edi_unmappable", "L1", 3)
    assert _problem(_simple("L1*1**   *10000")) == ("edi_unmappable", "L1", 3)


def test_a_cwt_linehaul_needs_a_weight_in_pounds() -> None:
    assert _problem(_simple("L1*1*10*PH*10000", l0="")) == ("edi_unmappable", "L1", 3)
    assert _problem(_simple("L1*1*10*PH*10000", l0="L0*1***3590*G***3*PCS**K")) == (
        "edi_unmappable",
        "L0",
        11,
    )
    leg = _leg(_simple("L1*1*10*PH*10000", l0="L0*1***1340*G***1*PLT**L"))
    assert leg["rated_quantity"] == "13.40"


def test_the_lading_line_of_the_linehaul_gives_its_weight() -> None:
    body = _simple("L1*2*10*PH*10000", l0="L0*1***100*G")
    body.insert(3, "L0*2***2500*G")
    assert _leg(body)["rated_quantity"] == "25.00"


def test_accessorials_are_the_other_charge_codes_as_sent() -> None:
    body = _simple(
        "L1*1*10*FR*10000",
        "L1*2***7500****LiftGate",
        "L1*3***140****405",  # fuel
        "L1*4***-2000****DSC",
        "L1*5***1500****CUS",
        "L1*6***700****HST",  # tax
    )
    leg = _leg(body)
    assert leg["accessorials"] == ["LiftGate", "CUS"]
    assert leg["billed_amount"] == "171.40"  # 100 + 75 + 1.40 - 20 + 15, not the 7.00 HST


@pytest.mark.parametrize("tax", ["GST", "HST", "PST", "QST"])
def test_tax_lines_are_kept_out_of_the_billed_amount_but_not_of_the_total(tax: str) -> None:
    leg = _leg(_simple("L1*1*10*FR*10000", f"L1*1*.07*CT*700****{tax}"))
    assert (leg["billed_amount"], leg["accessorials"]) == ("100.00", [])


def test_totals_must_match_b3_07_and_l3_05() -> None:
    body = _simple("L1*1*10*FR*10000")
    body[0] = body[0].replace("*10000*", "*10001*")
    assert _problem(body) == ("edi_total_mismatch", "B3", 7)
    body = _simple("L1*1*10*FR*10000")
    body[-1] = "L3*7889*G***9999"
    assert _problem(body) == ("edi_total_mismatch", "L3", 5)
    body[-1] = "L3*7889*G"  # L3-05 is optional
    assert _leg(body)["billed_amount"] == "100.00"


@pytest.mark.parametrize(
    ("change", "tag", "element"),
    [
        (("*10000**2026", "*100.00**2026"), "B3", 7),
        (("*FR*10000", "*FR*100.00"), "L1", 4),
        (("L3*7889*G***10000", "L3*7889*G***1.0"), "L3", 5),
        (("L1*1*10*", "L1*1*1.0.0*"), "L1", 2),
        (("L1*1*10*", "L1*1*1e3*"), "L1", 2),
        (("*10000**2026", "*" + "9" * 5_000_000 + "**2026"), "B3", 7),
    ],
)
def test_numbers_that_are_not_n2_or_r(change: tuple[str, str], tag: str, element: int) -> None:
    body = [s.replace(*change) for s in _simple("L1*1*10*FR*10000")]
    assert _problem(body) == ("edi_bad_number", tag, element)


def test_r_numbers_may_start_with_a_point_or_a_sign() -> None:
    assert _leg(_simple("L1*1*.07*FR*10000"))["billed_amount"] == "100.00"
    assert _leg(_simple("L1*1*-.62*FR*10000"))["billed_amount"] == "100.00"


def test_an_amount_beyond_a_moneys_range_is_unmappable() -> None:
    huge = "1" + "0" * 16  # 10^14 in N2
    assert _problem(_simple(f"L1*1*10*FR*{huge}")) == ("edi_unmappable", "L1", 4)


def test_cancellations_and_corrections_are_not_settled() -> None:
    body = _simple("L1*1*10*FR*10000")
    assert _problem([body[0], "B2A*01", *body[1:]]) == ("edi_unsupported_purpose", "B2A", 1)
    assert _leg([body[0], "B2A*00*CI", *body[1:]])["billed_amount"] == "100.00"
    corrected = [body[0].replace("*20260106*", "Y*20260106*", 1), *body[1:]]
    assert _problem(corrected) == ("edi_unsupported_purpose", "B3", 8)


@pytest.mark.parametrize(
    ("b3", "element"),
    [
        ("B3***1*PP**20260105*10000**20260106*035*ABCD", 2),  # no invoice number
        ("B3**" + "X" * 129 + "*1*PP**20260105*10000**20260106*035*ABCD", 2),
        ("B3**A|B*1*PP**20260105*10000**20260106*035*ABCD", 2),
        ("B3**INV-9*1*PP**20260105*10000**20260106*035", 11),  # no SCAC
    ],
)
def test_identifiers_must_fit_the_model(b3: str, element: int) -> None:
    body = _simple("L1*1*10*FR*10000")
    assert _problem([b3, *body[1:]]) == ("edi_unmappable", "B3", element)


def test_the_scac_is_upper_cased() -> None:
    body = _simple("L1*1*10*FR*10000")
    [document] = _map([body[0].replace("ABCD", " abcd "), *body[1:]]).documents
    assert document["partition_key"] == "ABCD"


def test_a_210_needs_one_b3() -> None:
    body = _simple("L1*1*10*FR*10000")
    assert _problem(body[1:]) == ("edi_unmappable", "ST", None)
    assert _problem([body[0], *body]) == ("edi_unmappable", "ST", None)


def test_every_problem_of_a_set_is_reported() -> None:
    body = [
        "B3**INV-9*1*PP**20260105*10000**20260106*035*ABCD",
        "LX*1",
        "L0*1***7889*G***3*PCS",
        "L1*1*10*FR*1.00",
        "L1*2***x****CUS",
        "L3*7889*G***10000",
    ]
    problems = _problems(body)
    assert [(p.code, p.tag, p.element) for p in problems] == [
        ("edi_bad_number", "L1", 4),
        ("edi_bad_number", "L1", 4),
    ]
    assert [p.segment for p in problems] == [7, 8]  # ST 3, B3 4, LX 5, L0 6, then the L1s
