"""Settlement math is exact for every input the wire admits (docs/architecture.md#exact-money,
docs/architecture.md#decimal-limits).

``shared.domain.money.PRECISION`` is chosen from the longest intermediate any kind's
model can make from bounded inputs, and its context traps ``Inexact`` and
``Rounded``. These tests settle the extreme inputs of every kind (every field
at its largest magnitude and finest place, both signs where the model allows
them) and check that nothing traps, that the one rounding is half up at the
quantum, and that an amount too big for the ledger is ``amount_out_of_range``,
never ``internal_error``. (That a trap fires where a rounding would happen is
``tests/unit/test_money.py``'s regression test.)
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.kinds import KINDS
from shared.domain.kinds.freight_audit import FreightContract, FreightDocument
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.kinds.recipe_cost import RecipeContract, RecipeDocument
from shared.domain.money import CENT
from shared.domain.pipeline.settlement import plan_chunk

BIGGEST = "999999999999.999999"  # the largest quantity or rate: 18 significant digits
MOST_NEGATIVE = "-" + BIGGEST
BIGGEST_MONEY = "999999999999.9999"
FAST = settings(max_examples=60, deadline=None, database=None)


def exactly(value: Decimal, quantum: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 400
        return value.quantize(quantum, rounding=ROUND_HALF_UP)


def wide(compute: Any) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 400
        return Decimal(compute())


def freight(leg: dict[str, Any], contract: dict[str, Any]) -> tuple[Any, Any, Any]:
    document = FreightDocument.model_validate_json(
        json.dumps(
            {
                "document_id": "FRT-1",
                "partition_key": "CARRIER-1",
                "contract_version": 1,
                "document_type": "EDI",
                "legs": [{"leg_no": 1, "billed_amount": "0", **leg}],
            }
        )
    )
    return (
        document,
        FreightContract.model_validate_json(json.dumps(contract)),
        KINDS["freight_audit"],
    )


@pytest.mark.parametrize("discount", [BIGGEST, MOST_NEGATIVE, "0.000001"])
@pytest.mark.parametrize("fuel_basis", ["net", "gross"])
def test_freight_at_every_limit_is_exact_and_rounded_once(discount: str, fuel_basis: str) -> None:
    per_mile = {f"PM{i}": {"per": "mile", "rate": BIGGEST} for i in range(50)}
    flat = {f"FL{i}": BIGGEST_MONEY for i in range(50)}
    document, contract, kind = freight(
        {"miles": BIGGEST, "rated_quantity": BIGGEST, "accessorials": [*per_mile, *flat]},
        {
            "rate_per_mile": BIGGEST,
            "discount_pct": discount,
            "fuel_surcharge": BIGGEST,
            "fuel_basis": fuel_basis,
            "accessorials": per_mile | flat,
            "tolerance": BIGGEST_MONEY,
        },
    )
    (line,) = kind.lines(document)
    result = kind.settle(document, line, contract)  # no Inexact, no Rounded
    big, d = Decimal(BIGGEST), Decimal(discount)

    def model() -> Decimal:
        gross = big * big
        net = gross * (1 - d)
        fuel = big * (net if fuel_basis == "net" else gross)
        return net + fuel + 50 * big * big + 50 * Decimal(BIGGEST_MONEY)

    assert result.amount == exactly(wide(model), CENT)
    # Far beyond NUMERIC(20,4): the line alone is dead-lettered, as
    # docs/architecture.md#decimal-limits says.
    plan = plan_chunk(kind, [document], {("CARRIER-1", 1): contract})
    assert [(p.reason, p.settlement) for p in plan.lines] == [("amount_out_of_range", None)]
    assert plan.failed_documents == []


def test_promo_at_every_limit_is_exact_and_rounded_once() -> None:
    document = PromoDocument.model_validate_json(
        json.dumps(
            {
                "document_id": "INV-1",
                "partition_key": "VENDOR-1",
                "contract_version": 1,
                "period": "2026-Q3",
                "lines": [
                    {
                        "line_no": 1,
                        "sku": "SKU-1",
                        "promo_tier": "T1",
                        "qualifying_units": BIGGEST,
                        "claimed_amount": "-" + BIGGEST_MONEY,
                    }
                ],
            }
        )
    )
    contract = PromoContract.model_validate(
        {"tier_rates": {"T1": BIGGEST}, "tolerance": BIGGEST_MONEY}
    )
    kind = KINDS["promo_accrual"]
    (line,) = kind.lines(document)
    result = kind.settle(document, line, contract)
    assert result.amount == exactly(wide(lambda: Decimal(BIGGEST) ** 2), CENT)
    assert result.outcome == "disputed"


def test_recipe_at_every_limit_is_exact_and_rounded_once() -> None:
    skus = 100_000  # the most a bom (and a pricing snapshot) may hold
    bom = {f"S{i}": BIGGEST for i in range(skus)}
    document = RecipeDocument.model_validate_json(
        json.dumps(
            {
                "document_id": "REQ-1",
                "partition_key": "RCP-1",
                "contract_version": 1,
                "recipe_id": "RCP-1",
                "location_ids": ["LOC-1"],
                "effective_at": "2026-07-01T00:00:00Z",
                "pricing_snapshot": {sku: MOST_NEGATIVE for sku in bom},
                "trigger": "vendor_rate",
            }
        )
    )
    contract = RecipeContract.model_validate_json(json.dumps({"bom": bom}))
    kind = KINDS["recipe_cost"]
    (line,) = kind.lines(document)
    result = kind.settle(document, line, contract)
    expected = wide(lambda: -skus * Decimal(BIGGEST) ** 2)
    assert result.amount == exactly(expected, Decimal("0.0001"))


def full_range(places: int) -> Any:
    """Any wire value: up to 12 integer digits and ``places`` places, either sign."""
    limit = 10 ** (12 + places) - 1
    return st.integers(-limit, limit).map(lambda n: format(Decimal(n).scaleb(-places), "f"))


@FAST
@given(
    quantity=full_range(6),
    rate=full_range(6),
    discount=full_range(6),
    fuel=full_range(6),
    per_mile=full_range(6),
    flat=full_range(4),
    fuel_basis=st.sampled_from(["net", "gross"]),
)
def test_freight_over_the_whole_wire_range_is_exact(
    quantity: str, rate: str, discount: str, fuel: str, per_mile: str, flat: str, fuel_basis: str
) -> None:
    miles = quantity.lstrip("-")
    document, contract, kind = freight(
        {"miles": miles, "accessorials": ["ENS", "LIFTGATE"]},
        {
            "rate_per_mile": rate.lstrip("-"),
            "discount_pct": discount,
            "fuel_surcharge": fuel,
            "fuel_basis": fuel_basis,
            "accessorials": {"ENS": {"per": "mile", "rate": per_mile}, "LIFTGATE": flat},
            "tolerance": "1",
        },
    )
    (line,) = kind.lines(document)
    result = kind.settle(document, line, contract)
    q, r = Decimal(miles), Decimal(rate.lstrip("-"))

    def model() -> Decimal:
        gross = q * r
        net = gross * (1 - Decimal(discount))
        base = net if fuel_basis == "net" else gross
        return net + Decimal(fuel) * base + Decimal(per_mile) * q + Decimal(flat)

    assert result.amount == exactly(wide(model), CENT)
