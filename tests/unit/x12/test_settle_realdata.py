"""Real invoices, read from their own X12 files, settle to the cent under contracts that
hold only their printed terms (issue 16) — the same terms tests/unit/test_freight_audit.py
transcribes by hand — and an invoice sent as X12 has the reconciliation key of the same
invoice sent as JSON, so sending both posts once."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from shared.domain.kinds import get_kind
from shared.domain.x12.mapping.files import map_file
from shared.domain.x12.model import Mapped
from shared.domain.x12.reading.reader import read_file
from tests.unit.x12.build import DATA, REALDATA


def _mapped(path: Path, **query: Any) -> Mapped:
    if not path.is_file():
        pytest.skip(f"{path} absent")
    interchanges = read_file(path.read_bytes())
    return map_file(
        interchanges,
        contract_version=1,
        partition_key=query.get("partition_key"),
        period=query.get("period"),
    )


def _settle(path: Path, contract: dict[str, Any]) -> tuple[str, Decimal, Decimal | None]:
    mapped = _mapped(path)
    kind = get_kind(mapped.kind)
    terms = kind.contract_model.model_validate(contract)
    [raw] = mapped.documents
    document = kind.document_model.model_validate(raw)
    [line] = kind.lines(document)
    settled = kind.settle(document, line, terms)
    return settled.outcome, settled.amount, settled.claimed_amount


# 78.89 cwt at 46.09 = 3636.0401, less the 83% discount = 618.126817; fuel printed as
# "00.72%" of gross = 26.17948872; customs 15.00: 659.30630572 -> 659.31. The carrier
# billed 659.40 (its fuel was 26.27): 0.09 over the printed terms, within 0.10.
MGCTLYST = {
    "rates": {"cwt": "46.09"},
    "discount_pct": "0.83",
    "fuel_surcharge": "0.0072",
    "fuel_basis": "gross",
    "accessorials": {"CUS": "15.00"},
    "tolerance": "0.10",
}


def test_mgctlyst_posts_0_09_under_its_bill() -> None:
    outcome, amount, billed = _settle(DATA / "210-MGCTLYST-SAMPLE.EDI", MGCTLYST)
    assert (outcome, amount, billed) == ("posted", Decimal("659.31"), Decimal("659.40"))
    assert billed - amount == Decimal("0.09")
    strict = _settle(DATA / "210-MGCTLYST-SAMPLE.EDI", dict(MGCTLYST, tolerance="0.05"))
    assert strict[0] == "disputed"


@pytest.mark.parametrize(
    ("name", "contract", "amount"),
    [
        # 1 car at 2510.00 + ENS 0.1980 x 1234 miles (L1-17 with L1-18 MR) = 2754.332
        (
            "x12_210/CN_FreightInvoiceSample1.txt",
            {
                "rates": {"unit": "2510.00"},
                "accessorials": {"ENS": {"per": "mile", "rate": "0.1980"}},
                "tolerance": "0.00",
            },
            "2754.33",
        ),
        # 1 unit at 1705.00 + ENS 244.332 = 1949.332; its 7% GST (134.27) is tax: billed
        # 2083.60 less it, 1949.33, not the contract's business
        (
            "x12_210/CN_FreightInvoiceSample2.txt",
            {
                "rates": {"unit": "1705.00"},
                "accessorials": {"ENS": {"per": "mile", "rate": "0.1980"}},
                "tolerance": "0.00",
            },
            "1949.33",
        ),
        # 13.40 cwt at 41.93 = 561.862, less 80% = 112.3724, fuel 10.5% of net 11.799102
        (
            "x12_210/ts210_80char.edi",
            {
                "rates": {"cwt": "41.93"},
                "discount_pct": "0.80",
                "fuel_surcharge": "0.105",
                "tolerance": "0.00",
            },
            "124.17",
        ),
        # a flat truckload rate: 51.65, whatever the 1499 of L0-02
        ("x12_210/FreightInvoice.txt", {"rates": {"flat": "51.65"}, "tolerance": "0.00"}, "51.65"),
        # the allowance: 23.50 on 1,080 units; 0.021759 a unit (a Quantity's 6 places)
        # x 1080 = 23.49972 -> 23.50
        (
            "x12_810/Example5_Walmart.txt",
            {"tier_rates": {"I410": "0.021759"}, "tolerance": "0.00"},
            "23.50",
        ),
    ],
)
def test_real_invoices_settle_to_the_cent(name: str, contract: dict[str, Any], amount: str) -> None:
    outcome, model, claimed = _settle(REALDATA / name, contract)
    assert (outcome, model, claimed) == ("posted", Decimal(amount), Decimal(amount))


def _key(kind_name: str, document: dict[str, Any]) -> list[str]:
    kind = get_kind(kind_name)
    parsed = kind.document_model.model_validate_json(json.dumps(document))
    return [line.reconciliation_key for line in kind.lines(parsed)]


def test_a_210_sent_as_x12_has_the_key_of_the_same_invoice_sent_as_json() -> None:
    [x12_document] = _mapped(DATA / "210-MGCTLYST-SAMPLE.EDI").documents
    as_json = {
        "document_id": "09851270",
        "partition_key": "SCAC",
        "contract_version": 1,
        "document_type": "PDF",
        "legs": [{"leg_no": 1, "rate_basis": "cwt", "rated_quantity": "78.89",
                  "accessorials": ["CUS"], "billed_amount": "659.40"}],
    }  # fmt: skip
    assert _key("freight_audit", x12_document) == _key("freight_audit", as_json)


def test_an_810_sent_as_x12_has_the_key_of_the_same_invoice_sent_as_json() -> None:
    [x12_document] = _mapped(REALDATA / "x12_810/Example5_Walmart.txt").documents
    as_json = {
        "document_id": "6463367",
        "partition_key": "123456170",
        "contract_version": 1,
        "period": "2005-Q1",
        "lines": [{"line_no": 1, "sku": "022108955228", "promo_tier": "I410",
                   "qualifying_units": "1080", "claimed_amount": "23.50",
                   "store_id": "0078742000992", "transaction_date": "2005-02-05"}],
    }  # fmt: skip
    assert _key("promo_accrual", x12_document) == _key("promo_accrual", as_json)
    # The query's partition and period are the JSON's, and win over the file's.
    [overridden] = _mapped(
        REALDATA / "x12_810/Example5_Walmart.txt", partition_key="VENDOR-7", period="2005-P02"
    ).documents
    moved = dict(as_json, partition_key="VENDOR-7", period="2005-P02")
    assert _key("promo_accrual", overridden) == _key("promo_accrual", moved)
