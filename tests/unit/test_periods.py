"""The journal and balances' pure rules (shared/domain/periods.py,
docs/api.md#periods-and-the-close)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.config.settings import Settings
from shared.domain import periods
from shared.domain.kinds import KINDS
from shared.domain.periods import Activity, Balance

D = Decimal
DEFAULTS = periods.accounts(None)


def balance(kind: str, partition: str, *deltas: str, opening: str = "0") -> Balance:
    activity = Activity(posted=sum((D(d) for d in deltas), D(0)), rows=len(deltas))
    return Balance(kind, partition, D(opening), activity)


@pytest.mark.parametrize(
    "name", ["2026-12", "FY27.P01", "a", "x" * 32, "Q4_2026", "...", ".a", "a.", "a..b"]
)
def test_a_period_is_named_with_letters_digits_dots_dashes_and_underscores(name: str) -> None:
    assert periods.name_problem(name) is None


@pytest.mark.parametrize(
    "name", ["", "x" * 33, "2026 12", "2026/12", "déc", "a,b", "a\nb", ".", ".."]
)
def test_any_other_name_is_refused(name: str) -> None:
    assert periods.name_problem(name) is not None


@pytest.mark.regression
@pytest.mark.parametrize("name", [".", "..", "a b"])
def test_the_first_periods_setting_is_a_period_name(name: str) -> None:
    with pytest.raises(ValidationError, match="period_name_invalid"):
        Settings(first_period=name)


def test_the_first_period_is_the_setting_else_the_utc_month() -> None:
    late = dt.datetime(2026, 12, 31, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert periods.first_period(None, late) == "2027-01"  # already January in UTC
    assert periods.first_period("FY27", late) == "FY27"


def test_each_kind_has_its_default_accounts_and_the_setting_overrides_or_leaves_out() -> None:
    assert DEFAULTS["promo_accrual"] == KINDS["promo_accrual"].journal_accounts
    assert DEFAULTS["recipe_cost"] is None  # unit costs are no money owed
    mine = periods.accounts({"freight_audit": None, "recipe_cost": ("5000", "1400")})
    assert mine["freight_audit"] is None and mine["recipe_cost"] == ("5000", "1400")
    assert mine["promo_accrual"] == DEFAULTS["promo_accrual"]


def test_a_negative_balance_swaps_the_sides_and_a_kind_left_out_has_no_entry() -> None:
    found = periods.entries(
        "P",
        [
            balance("promo_accrual", "V-2", "-3.00", "1.00"),
            balance("promo_accrual", "V-1", "5.00"),
            balance("recipe_cost", "R-1", "0.1234"),
            balance("freight_audit", "C-1"),  # no rows: no entry
        ],
        DEFAULTS,
    )
    debit, credit = DEFAULTS["promo_accrual"]  # type: ignore[misc]
    assert [(e.partition_key, e.debit, e.credit, e.amount) for e in found] == [
        ("V-1", debit, credit, D("5.00")),
        ("V-2", credit, debit, D("2.00")),
    ]
    assert found[0].external_id == "settleq:P:promo_accrual:V-1"


def test_the_csv_is_two_balanced_lines_an_entry_its_text_neutralised_and_quoted() -> None:
    found = periods.entries("P", [balance("promo_accrual", '=1+1,"x"', "1234.5")], DEFAULTS)
    data = periods.journal_csv(found)
    assert data.endswith(b"\r\n")
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    assert [r["line"] for r in rows] == ["1", "2"]
    assert [r["debit"] for r in rows] == ["1234.50", ""]
    assert [r["credit"] for r in rows] == ["", "1234.50"]
    assert {r["partition_key"] for r in rows} == {'\'=1+1,"x"'}
    assert periods.sha256(data) == periods.sha256(periods.journal_csv(found))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(KINDS)),
            st.text(min_size=1, max_size=6),
            st.lists(st.decimals("-999999", "999999", places=2), min_size=1, max_size=4),
        ),
        max_size=8,
        unique_by=lambda t: (t[0], t[1]),
    )
)
def test_debits_equal_credits_and_every_entry_is_its_balances_activity(
    groups: list[tuple[str, str, list[Decimal]]],
) -> None:
    balances = [balance(k, p, *map(str, ds)) for k, p, ds in groups]
    found = periods.entries("P", balances, DEFAULTS)
    body = periods.journal_json("P", True, found, None)
    assert body["debits"] == body["credits"]
    by = {(b.kind, b.partition_key): b.activity.total for b in balances}
    for e in found:
        assert e.amount == abs(by[(e.kind, e.partition_key)])
        assert DEFAULTS[e.kind] in ((e.debit, e.credit), (e.credit, e.debit))
    assert all(e.kind != "recipe_cost" for e in found)


def test_a_rows_activity_is_one_of_four_sums() -> None:
    assert periods.activity_of("posted", False) == "posted"
    assert periods.activity_of("disputed", False) == "disputed"
    assert periods.activity_of("posted", True) == "repriced"
    assert periods.activity_of("disputed", True) == "repriced"
    assert periods.activity_of("resolved", True) == "resolved"


def test_direction_is_the_kinds() -> None:
    assert KINDS["promo_accrual"].direction == "owed_to_us"
    assert KINDS["freight_audit"].direction == "owed_by_us"
    assert KINDS["recipe_cost"].direction is None
