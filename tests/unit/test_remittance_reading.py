"""A remittance's deductions and its balance check (SPEC §3.12): pure functions."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.remittances.deductions import (
    DEFAULT_REASONS,
    balance,
    deductions,
    reason_class,
    unexplained_short_pay,
)
from shared.domain.remittances.model import Adjustment, Line, Payer, Remittance

# --- reasons, short-pays, and the property --------------------------------------


def test_the_default_reason_table_classes_element_426_and_an_unknown_code_is_other() -> None:
    expected = {
        "01": "pricing", "02": "promotion", "06": "shortage", "14": "return",
        "16": "promotion", "19": "duplicate", "22": "freight", "24": "discount",
        "54": "freight", "56": "promotion", "57": "promotion", "59": "shortage",
    }  # fmt: skip
    assert {code: DEFAULT_REASONS[code] for code in expected} == expected
    assert {code: reason_class(code) for code in expected} == expected
    assert reason_class("70") == reason_class("ZZ") == reason_class("") == "other"


def test_a_profile_overrides_the_class_of_a_code_and_no_other() -> None:
    overrides = {"70": "promotion", "59": "damage"}
    assert reason_class("70", overrides) == "promotion"
    assert reason_class("59", overrides) == "damage"  # over the default table
    assert reason_class("06", overrides) == "shortage"
    assert reason_class("71", overrides) == "other"
    with pytest.raises(ValueError, match="no reason class"):
        reason_class("70", {"70": "promo"})


def _line(paid: str, invoiced: str | None, discount: str | None, *adjustments: str) -> Line:
    return Line(
        reference="INV-1",
        paid=Decimal(paid),
        invoiced=None if invoiced is None else Decimal(invoiced),
        discount=None if discount is None else Decimal(discount),
        adjustments=tuple(Adjustment(amount=Decimal(a), reason_code="70") for a in adjustments),
    )


def _remittance(*lines: Line, adjustments: tuple[Adjustment, ...] = ()) -> Remittance:
    total = sum((line.paid for line in lines), Decimal(0))
    return Remittance(
        payer=Payer(id="R-7"),
        trace="T-1",
        paid_total=total,
        currency="USD",
        lines=lines,
        adjustments=adjustments,
    )


@pytest.mark.parametrize(
    ("line", "short"),
    [
        (_line("90", "100", "2"), "8"),  # nothing explains 8
        (_line("90", "100", "2", "-5"), "3"),  # an ADX explains 5 of it
        (_line("90", "100", "2", "-8"), "0"),  # explained whole
        (_line("90", "100", None), "10"),  # no discount taken
        (_line("110", "100", None, "10"), "0"),  # paid over, and an ADX adds it
        (_line("120", "100", None), "-20"),  # overpaid: nothing short
        (_line("90", None, "2"), "0"),  # nothing invoiced to compare with
    ],
)
def test_a_lines_unexplained_short_pay(line: Line, short: str) -> None:
    assert unexplained_short_pay(line) == Decimal(short)


def test_an_unexplained_short_pay_is_a_deduction_after_the_lines_own_adjustments() -> None:
    remittance = _remittance(
        _line("90", "100", "2", "-5", "4"),
        adjustments=(Adjustment(amount=Decimal("-1.50"), reason_code="02"),),
    )
    found = [(d.amount, d.reason_code, d.reason_class, d.line) for d in deductions(remittance)]
    assert found == [
        (Decimal(5), "70", "other", 0),
        (Decimal(7), "unexplained", "unexplained", 0),  # 100 - 2 - 90 - 5 + 4
        (Decimal("1.50"), "02", "promotion", None),
    ]
    assert deductions(remittance, {"70": "promotion"})[0].reason_class == "promotion"


def test_the_balance_check_reports_both_figures_and_counts_only_standalone_adjustments() -> None:
    remittance = _remittance(
        _line("90", "100", None, "-10"),  # paid is already net of its own adjustment
        _line("40.25", None, None),
        adjustments=(Adjustment(amount=Decimal("-20"), reason_code="ZZ"),),
    )
    stated = remittance.model_copy(update={"paid_total": Decimal("100.00")})
    check = balance(stated)
    assert (check.stated, check.computed) == (Decimal("100.00"), Decimal("110.25"))
    assert check.difference == Decimal("-10.25") and not check.balanced
    assert balance(stated.model_copy(update={"paid_total": Decimal("110.25")})).balanced


_AMOUNTS = st.decimals(
    min_value=Decimal("-99999.99"), max_value=Decimal("99999.99"), places=2, allow_nan=False
)
_ADJUSTMENTS = st.lists(
    st.builds(
        Adjustment,
        amount=_AMOUNTS,
        reason_code=st.sampled_from(["01", "02", "59", "ZZ", "70"]),
    ),
    max_size=4,
).map(tuple)
_LINES = st.builds(
    Line,
    reference=st.just("INV-1"),
    paid=_AMOUNTS,
    invoiced=st.none() | _AMOUNTS,
    discount=st.none() | _AMOUNTS,
    adjustments=_ADJUSTMENTS,
)


@given(lines=st.lists(_LINES, max_size=4), standalone=_ADJUSTMENTS)
def test_a_deduction_never_comes_from_a_positive_adjustment(
    lines: list[Line], standalone: tuple[Adjustment, ...]
) -> None:
    remittance = _remittance(*lines, adjustments=standalone)
    found = deductions(remittance)
    assert all(d.amount > 0 for d in found)
    taken = [d.amount for d in found if d.reason_code != "unexplained"]
    every = [a for line in lines for a in line.adjustments] + list(standalone)
    assert taken == [-a.amount for a in every if a.amount < 0]
    shorts = [d for d in found if d.reason_code == "unexplained"]
    assert len(shorts) == sum(1 for line in lines if unexplained_short_pay(line) > 0)
