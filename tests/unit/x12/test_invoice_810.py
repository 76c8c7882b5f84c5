"""810 → promo_accrual (docs/architecture.md#edi-intake): a line per allowance SAC inside
an IT1 loop, each value from where the table says, each refusal located."""

from __future__ import annotations

from typing import Any

import pytest

from shared.domain.kinds.promo_accrual import PromoDocument
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import EdiRefused, Mapped, Skipped
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import invoice, x12

WALMART_IT1 = "IT1**1080*EA*3.61**IN*001719653*UP*022108955228*UK*00221089552284"


def _map(body: list[str], partition_key: str | None = None, period: str | None = None) -> Mapped:
    mapped = map_file(
        read_file(x12([("810", "0001", body)])),
        contract_version=2,
        partition_key=partition_key,
        period=period,
    )
    for document in mapped.documents:
        PromoDocument.model_validate(document)
    return mapped


def _lines(body: list[str], **query: Any) -> list[dict[str, Any]]:
    [document] = _map(body, **query).documents
    return document["lines"]  # type: ignore[no-any-return]


def _problem(body: list[str], **query: Any) -> tuple[str, str | None, int | None]:
    with pytest.raises(EdiRefused) as caught:
        _map(body, **query)
    problem = caught.value.problems[0]
    assert problem.control_number == "0001" or problem.code == "edi_no_documents"
    return problem.code, problem.tag, problem.element


def test_the_walmart_allowance_maps_field_by_field() -> None:
    [document] = _map(invoice()).documents
    assert {k: v for k, v in document.items() if k != "lines"} == {
        "document_id": "6463367",
        "partition_key": "123456170",  # REF*IA
        "contract_version": 2,
        "correlation_id": "x12:SENDER:000000001:1:0001",
        "period": "2005-Q1",  # BIG-01's quarter
    }
    assert document["lines"] == [
        {
            "line_no": 1,  # IT1-01 empty: the first IT1
            "sku": "022108955228",  # UP before UK and IN
            "promo_tier": "I410",  # SAC-02 (no SAC-13)
            "qualifying_units": "1080",  # IT1-02 (no SAC-10)
            "claimed_amount": "23.50",  # SAC-05, N2
            "store_id": "0078742000992",  # N1*ST N1-04
            "transaction_date": "2005-02-05",
        }
    ]


@pytest.mark.parametrize(
    "sac",
    [
        "SAC*C*D240***500",  # a charge
        "SAC*N*B840*AB*Buyer*19998",  # no charge
        "SAC*A*C310***4119*3*10",  # a percentage (SAC06/07)
        "SAC*A*C310***4119**10",
    ],
)
def test_sacs_that_are_not_lines(sac: str) -> None:
    mapped = map_file(
        read_file(x12([("810", "0001", invoice([WALMART_IT1, sac])), ("810", "0002", invoice())])),
        contract_version=2,
        partition_key=None,
        period=None,
    )
    assert mapped.skipped == [Skipped("0001", "no_allowance")]
    assert [d["correlation_id"][-4:] for d in mapped.documents] == ["0002"]


def test_header_and_summary_allowances_are_not_lines() -> None:
    body = invoice(["IT1**10*EA*1**UP*1"], REF="REF*IA*V1")
    body.insert(1, "SAC*A*H000***500")
    body.insert(-1, "SAC*A*S000***700")  # after TDS
    with pytest.raises(EdiRefused) as caught:
        _map(body)
    assert caught.value.code == "edi_no_documents"


def test_line_numbers_from_it1_01_else_the_it1s_place() -> None:
    lines = _lines(
        invoice(
            ["IT1*10*1*EA*1**UP*A", "SAC*A*T1***100"],
            ["IT1**2*EA*1**UP*B"],
            ["IT1*X1*3*EA*1**UP*C", "SAC*A*T1***300"],
        )
    )
    assert [(line["line_no"], line["sku"]) for line in lines] == [(10, "A"), (3, "C")]


def test_line_numbers_must_be_numbers_once_each() -> None:
    twice = invoice(
        ["IT1*1*1*EA*1**UP*A", "SAC*A*T1***100"], ["IT1*1*1*EA*1**UP*B", "SAC*A*T1***1"]
    )
    assert _problem(twice) == ("edi_unmappable", "IT1", 1)
    assert _problem(invoice(["IT1*0*1*EA*1**UP*A", "SAC*A*T1***100"])) == (
        "edi_unmappable",
        "IT1",
        1,
    )


def test_one_allowance_per_it1_loop() -> None:
    body = invoice(["IT1*1*1*EA*1**UP*A", "SAC*A*T1***100", "SAC*A*T2***200"])
    assert _problem(body) == ("edi_unmappable", "SAC", None)


@pytest.mark.parametrize(
    ("it1", "sku"),
    [
        ("IT1*1*1*EA*1**VP*V-1*UP*U-1*SK*S-1", "U-1"),
        ("IT1*1*1*EA*1**SK*S-1*BP*B-1*IN*I-1", "I-1"),
        ("IT1*1*1*EA*1**SK*S-1*EN*E-1", "E-1"),
        ("IT1*1*1*EA*1**ZZ*Z-1*MG*M-1", "Z-1"),  # no preferred qualifier: the first pair
        ("IT1*1*1*EA*1**UP**VN*V-9", "V-9"),  # an empty value does not count
    ],
)
def test_the_sku_by_qualifier_preference(it1: str, sku: str) -> None:
    [line] = _lines(invoice([it1, "SAC*A*T1***100"]))
    assert line["sku"] == sku


def test_no_item_id_is_unmappable() -> None:
    assert _problem(invoice(["IT1*1*1*EA*1", "SAC*A*T1***100"])) == ("edi_unmappable", "IT1", 6)


def test_tier_units_and_amount_prefer_the_sac() -> None:
    [line] = _lines(invoice(["IT1*1*40*EA*1**UP*A", "SAC*A*T1***250*****12***TIER-2"]))
    assert (line["promo_tier"], line["qualifying_units"], line["claimed_amount"]) == (
        "TIER-2",
        "12",
        "2.50",
    )
    # No SAC-05: SAC-08 (a rate) times the units, exactly.
    [line] = _lines(invoice(["IT1*1*37*EA*1**UP*A", "SAC*A*T1******.0125"]))
    assert line["claimed_amount"] == "0.4625"


def test_an_allowance_needs_an_amount_and_units() -> None:
    assert _problem(invoice(["IT1*1*37*EA*1**UP*A", "SAC*A*T1"])) == ("edi_unmappable", "SAC", 5)
    assert _problem(invoice(["IT1*1**EA*1**UP*A", "SAC*A*T1***100"])) == (
        "edi_unmappable",
        "IT1",
        2,
    )
    assert _problem(invoice(["IT1*1*3*EA*1**UP*A", "SAC*A****100"])) == ("edi_unmappable", "SAC", 2)
    # A rate times units with more places than a Money holds is not rounded.
    body = invoice(["IT1*1*3.5*EA*1**UP*A", "SAC*A*T1******.00125"])
    assert _problem(body) == ("edi_unmappable", "SAC", 5)


@pytest.mark.parametrize(
    ("sac", "tds", "element", "tag"),
    [
        ("SAC*A*T1***23.50", "TDS*100", 5, "SAC"),
        ("SAC*A*T1***2350", "TDS*1.00", 1, "TDS"),
        ("SAC*A*T1******1.2.3", "TDS*100", 8, "SAC"),
    ],
)
def test_numbers_that_are_not_n2_or_r(sac: str, tds: str, element: int, tag: str) -> None:
    body = invoice(["IT1*1*3*EA*1**UP*A", sac])
    body[-2] = tds
    assert _problem(body) == ("edi_bad_number", tag, element)


def test_the_store_is_the_lines_ship_to_else_the_headers() -> None:
    lines = _lines(
        invoice(
            ["IT1*1*1*EA*1**UP*A", "SAC*A*T1***100", "N1*ST*STORE 9*92*0009"],
            ["IT1*2*1*EA*1**UP*B", "SAC*A*T1***100", "N1*ST*NO NUMBER"],
        )
    )
    assert [line["store_id"] for line in lines] == ["0009", "0078742000992"]
    [line] = _lines(invoice(N1ST=""))
    assert "store_id" not in line


@pytest.mark.parametrize(
    ("over", "partition"),
    [
        ({}, "123456170"),
        ({"REF": "REF*VN*V-22"}, "V-22"),
        ({"REF": "REF*IA*"}, "SU-1"),  # an empty REF does not count
        ({"REF": "", "N1SU": "N1*SU*SUPPLIER*92*SU-1"}, "SU-1"),
        ({"REF": "", "N1SU": "N1*SE*SELLER*92*SE-1"}, "SE-1"),
    ],
)
def test_the_vendor_is_ref_ia_else_ref_vn_else_the_vendors_n1(
    over: dict[str, str], partition: str
) -> None:
    body = invoice(**over)
    if over.get("REF") == "REF*IA*":
        body.insert(2, "N1*VN*VENDOR*92*SU-1")
    [document] = _map(body).documents
    assert document["partition_key"] == partition


def test_the_query_wins_over_the_file() -> None:
    [document] = _map(invoice(), partition_key="VENDOR-7", period="2026-P07").documents
    assert (document["partition_key"], document["period"]) == ("VENDOR-7", "2026-P07")
    assert _problem(invoice(REF="", N1SU="")) == ("edi_unmappable", "ST", None)
    assert _problem(invoice(), partition_key="A|B") == ("edi_unmappable", "ST", None)


@pytest.mark.parametrize(
    ("big01", "period"), [("20050331", "2005-Q1"), ("20051001", "2005-Q4"), ("20260615", "2026-Q2")]
)
def test_the_period_is_big_01s_quarter(big01: str, period: str) -> None:
    [document] = _map(invoice(BIG=f"BIG*{big01}*INV-3")).documents
    assert document["period"] == period
    assert document["lines"][0]["transaction_date"] == f"{big01[:4]}-{big01[4:6]}-{big01[6:]}"


@pytest.mark.parametrize("big01", ["050205", "20050230", "2005-02-05", ""])
def test_big_01_must_be_a_date(big01: str) -> None:
    assert _problem(invoice(BIG=f"BIG*{big01}*INV-3")) == ("edi_unmappable", "BIG", 1)


@pytest.mark.parametrize(
    ("big", "element"),
    [("BIG*20050205*INV-3*****CR", 7), ("BIG*20050205*INV-3******01", 8)],
)
def test_credit_memos_and_cancellations_are_not_settled(big: str, element: int) -> None:
    assert _problem(invoice(BIG=big)) == ("edi_unsupported_purpose", "BIG", element)
    assert _map(invoice(BIG="BIG*20050205*INV-3*****DI*00")).documents


def test_an_810_needs_one_big_and_an_invoice_number() -> None:
    assert _problem(invoice(BIG="")) == ("edi_unmappable", "ST", None)
    assert _problem(invoice(BIG="BIG*20050205")) == ("edi_unmappable", "BIG", 2)
