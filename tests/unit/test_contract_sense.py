"""A contract that cannot price anything sensibly is refused when it is published
(docs/api.md#contracts, issue 29 item 5): a negative tolerance, rate, price,
quantity or surcharge, a discount outside [0, 1), an empty rate table; each
refusal ``contract_invalid`` at the field's path. Zero is sensible (a free tier,
an exact match, no fuel): it publishes. What a worker reads back from the
ledger is read as it was published (a published version is immutable)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.domain.kinds import KINDS
from shared.domain.money import MONEY_PLACES, QUANTITY_PLACES

Body = dict[str, Any]


def _promo() -> Body:
    return {"tier_rates": {"T1": "0.125", "T2": "0.45"}, "tolerance": "0.05"}


def _recipe() -> Body:
    return {"bom": {"FLOUR": "0.5", "MOZZ": "0.25"}}


def _freight() -> Body:
    return {
        "rate_per_mile": "2.15",
        "rates": {"cwt": "41.93", "flat": "45.00"},
        "fuel_surcharge": "0.25",
        "accessorials": {"LIFTGATE": "75.00", "ENS": {"per": "mile", "rate": "0.198"}},
        "discount_pct": "0.80",
        "tolerance": "1.00",
    }


BASES: dict[str, Callable[[], Body]] = {
    "promo_accrual": _promo,
    "recipe_cost": _recipe,
    "freight_audit": _freight,
}
# Every priced field of every kind, at its path: (kind, path, places).
PRICED: list[tuple[str, tuple[str, ...], int]] = [
    ("promo_accrual", ("tier_rates", "T2"), QUANTITY_PLACES),
    ("promo_accrual", ("tolerance",), MONEY_PLACES),
    ("recipe_cost", ("bom", "MOZZ"), QUANTITY_PLACES),
    ("freight_audit", ("rate_per_mile",), QUANTITY_PLACES),
    ("freight_audit", ("rates", "cwt"), QUANTITY_PLACES),
    ("freight_audit", ("rates", "flat"), QUANTITY_PLACES),
    ("freight_audit", ("fuel_surcharge",), QUANTITY_PLACES),
    ("freight_audit", ("accessorials", "LIFTGATE"), MONEY_PLACES),
    ("freight_audit", ("accessorials", "ENS", "rate"), QUANTITY_PLACES),
    ("freight_audit", ("discount_pct",), QUANTITY_PLACES),
    ("freight_audit", ("tolerance",), MONEY_PLACES),
]
FIELD_IDS = [f"{kind}-{'.'.join(path)}" for kind, path, _ in PRICED]


def _put(body: Body, path: tuple[str, ...], value: str) -> Body:
    at = body
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return body


def _publish(kind: str, body: Body) -> Any:
    return KINDS[kind].contract_for_publication(body)


def _refusals(kind: str, body: Body) -> list[tuple[tuple[str, ...], str]]:
    with pytest.raises(ValidationError) as info:
        _publish(kind, body)
    return [(tuple(str(p) for p in e["loc"]), e["type"]) for e in info.value.errors()]


def _decimals(places: int, low: Decimal, high: Decimal) -> st.SearchStrategy[str]:
    """Plain decimal strings of at most ``places`` places in [low, high]."""
    return st.decimals(min_value=low, max_value=high, places=places).map(lambda d: format(d, "f"))


def _positive(places: int) -> st.SearchStrategy[str]:
    return _decimals(places, Decimal(1).scaleb(-places), Decimal(10**12 - 1))


@pytest.mark.regression
@settings(max_examples=40, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize(("kind", "path", "places"), PRICED, ids=FIELD_IDS)
def test_any_negative_value_is_refused_naming_its_field(
    kind: str, path: tuple[str, ...], places: int, data: st.DataObject
) -> None:
    magnitude = data.draw(_positive(places if path != ("discount_pct",) else QUANTITY_PLACES))
    body = _put(BASES[kind](), path, f"-{magnitude}")
    assert _refusals(kind, body) == [(path, "contract_invalid")]


@pytest.mark.parametrize(("kind", "path", "places"), PRICED, ids=FIELD_IDS)
def test_a_negative_zero_is_refused_as_a_negative(
    kind: str, path: tuple[str, ...], places: int
) -> None:
    """``-0``: the published schema allows no minus sign, and neither does the server."""
    assert _refusals(kind, _put(BASES[kind](), path, "-0")) == [(path, "contract_invalid")]


@pytest.mark.regression
@settings(max_examples=60, deadline=None)
@given(discount=_decimals(QUANTITY_PLACES, Decimal(1), Decimal(10**12 - 1)))
def test_a_discount_of_a_hundred_percent_or_more_is_refused(discount: str) -> None:
    body = _put(_freight(), ("discount_pct",), discount)
    assert _refusals("freight_audit", body) == [(("discount_pct",), "contract_invalid")]


@pytest.mark.regression
@pytest.mark.parametrize(
    ("kind", "body", "path"),
    [
        ("promo_accrual", {"tier_rates": {}, "tolerance": "0.05"}, ("tier_rates",)),
        ("recipe_cost", {"bom": {}}, ("bom",)),
        ("freight_audit", {"tolerance": "1"}, ("rates",)),
        ("freight_audit", {"rates": {}, "tolerance": "1"}, ("rates",)),
        ("freight_audit", {"rate_per_mile": None, "rates": {}, "tolerance": "1"}, ("rates",)),
    ],
    ids=["promo", "recipe", "freight-no-rate", "freight-empty-rates", "freight-null-rate"],
)
def test_an_empty_rate_table_is_refused(kind: str, body: Body, path: tuple[str, ...]) -> None:
    assert _refusals(kind, body) == [(path, "contract_invalid")]
    # As ever on a read, too: no stored contract has an empty table.
    with pytest.raises(ValidationError) as info:
        KINDS[kind].contract_model.model_validate(body)
    assert [e["type"] for e in info.value.errors()] == ["contract_invalid"]


def _valid_promo() -> st.SearchStrategy[Body]:
    rate = _decimals(QUANTITY_PLACES, Decimal(0), Decimal(10**12 - 1))
    tiers = st.dictionaries(st.sampled_from(["T1", "T2", "T3", "FREE"]), rate, min_size=1)
    tolerance = _decimals(MONEY_PLACES, Decimal(0), Decimal(10**12 - 1))
    return st.fixed_dictionaries({"tier_rates": tiers, "tolerance": tolerance})


def _valid_recipe() -> st.SearchStrategy[Body]:
    quantity = _decimals(QUANTITY_PLACES, Decimal(0), Decimal(10**12 - 1))
    skus = st.sampled_from(["FLOUR", "WATER", "SALT", "MOZZ"])
    return st.fixed_dictionaries({"bom": st.dictionaries(skus, quantity, min_size=1)})


def _valid_freight() -> st.SearchStrategy[Body]:
    rate = _decimals(QUANTITY_PLACES, Decimal(0), Decimal(10**12 - 1))
    price = _decimals(MONEY_PLACES, Decimal(0), Decimal(10**12 - 1))
    bases = st.sampled_from(["cwt", "unit", "flat"])
    per_mile = st.fixed_dictionaries({"per": st.just("mile"), "rate": rate})
    codes = st.sampled_from(["LIFTGATE", "ENS", "DET", "INSIDE"])
    return st.fixed_dictionaries(
        {"rates": st.dictionaries(bases, rate, min_size=1), "tolerance": price},
        optional={
            "rate_per_mile": rate,
            "fuel_surcharge": rate,
            "accessorials": st.dictionaries(codes, st.one_of(price, per_mile)),
            "discount_pct": _decimals(QUANTITY_PLACES, Decimal(0), Decimal("0.999999")),
            "fuel_basis": st.sampled_from(["net", "gross"]),
        },
    )


VALID = {
    "promo_accrual": _valid_promo(),
    "recipe_cost": _valid_recipe(),
    "freight_audit": _valid_freight(),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("kind", sorted(VALID))
def test_a_sensible_contract_publishes_as_sent(kind: str, data: st.DataObject) -> None:
    """Zero and every positive value within the decimal limits is sensible, and a
    discount below 1: published, with the values as sent."""
    body = data.draw(VALID[kind])
    published = _publish(kind, body).model_dump(mode="json")
    assert {k: published[k] for k in body} == body


@pytest.mark.parametrize(("kind", "path", "places"), PRICED, ids=FIELD_IDS)
def test_a_stored_contract_is_read_as_it_was_published(
    kind: str, path: tuple[str, ...], places: int
) -> None:
    """A version published before these checks (negative tolerance and all) still
    settles what is pinned to it: a worker reads it, it does not refuse it."""
    body = _put(BASES[kind](), path, "-1")
    read = KINDS[kind].contract_model.model_validate(body).model_dump(mode="json")
    at = read
    for key in path:
        at = at[key]
    assert at == "-1"
