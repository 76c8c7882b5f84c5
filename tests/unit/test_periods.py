"""The journal and balances' pure rules (shared/domain/periods.py,
docs/api.md#periods-and-the-close)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from zoneinfo import ZoneInfo

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


def _pair(kind: str) -> tuple[str, str]:
    accounts = DEFAULTS[kind]
    assert accounts is not None
    return accounts.debit, accounts.credit


def test_each_kind_has_its_default_accounts_and_the_setting_overrides_or_leaves_out() -> None:
    assert _pair("promo_accrual") == KINDS["promo_accrual"].journal_accounts
    assert DEFAULTS["recipe_cost"] is None  # unit costs are no money owed
    mine = periods.accounts({"freight_audit": None, "recipe_cost": ("5000", "1400")})
    assert mine["freight_audit"] is None and mine["recipe_cost"] == periods.booking("5000", "1400")
    assert mine["promo_accrual"] == DEFAULTS["promo_accrual"]


def test_a_kinds_disputed_and_remittance_outcomes_have_default_accounts_of_their_own() -> None:
    promo = DEFAULTS["promo_accrual"]
    assert promo is not None
    # A match and a write-off take money off the receivable the accrual is on.
    assert promo.of("deducted") == ("1250 Customer deductions clearing", promo.debit)
    assert promo.of("written_off") == ("6450 Deduction write-offs", promo.debit)
    assert promo.of("posted") is None
    # Disputed money is kept on accounts of its own.
    assert promo.of("disputed") == (
        "1315 Vendor promotional receivable in dispute",
        "4565 Promotional allowances in dispute",
    )
    freight = DEFAULTS["freight_audit"]
    assert freight is not None and [o for o, _ in freight.outcomes] == ["disputed"]


def test_the_setting_takes_accounts_per_outcome_and_a_kind_named_keeps_only_its_own() -> None:
    given = Settings(
        journal_accounts={
            "promo_accrual": {
                "debit": "A",
                "credit": "B",
                "written_off": {"debit": "W", "credit": "A"},
            },
            "freight_audit": {"debit": "F", "credit": "P"},
        }
    ).journal_pairs()
    mine = periods.accounts(given)
    assert mine["promo_accrual"] == periods.Booking("A", "B", (("written_off", ("W", "A")),))
    assert mine["freight_audit"] == periods.booking("F", "P")
    with pytest.raises(ValidationError):
        Settings(journal_accounts={"promo_accrual": {"debit": "A", "credit": "B", "posted": {}}})


def test_stored_accounts_read_back_and_old_ones_without_outcomes_still_read() -> None:
    for accounts in DEFAULTS.values():
        if accounts is not None:
            assert periods.stored_booking(accounts.stored()) == accounts
    assert periods.stored_booking(["D", "C"]) == periods.Booking("D", "C")
    assert periods.stored_booking(None) is None


def matched(partition: str, posted: str, deducted: str, written_off: str) -> Balance:
    activity = Activity()
    activity.add("posted", False, D(posted))
    activity.add("deducted", False, D(deducted))
    activity.add("deducted", False, D("0"))
    activity.add("written_off", False, D(written_off))
    return Balance("promo_accrual", partition, D(0), activity)


def test_deducted_and_written_off_rows_are_entries_of_their_own_on_their_accounts() -> None:
    found = periods.entries("P", [matched("V-1", "100.00", "-60.00", "-5.00")], DEFAULTS)
    debit, credit = _pair("promo_accrual")
    assert [(e.external_id, e.debit, e.credit, e.amount, e.rows) for e in found] == [
        ("settleq:P:promo_accrual:V-1", debit, credit, D("100.00"), 1),
        (
            "settleq:P:promo_accrual:V-1:deducted",
            "1250 Customer deductions clearing",
            debit,
            D("60.00"),
            2,
        ),
        (
            "settleq:P:promo_accrual:V-1:written_off",
            "6450 Deduction write-offs",
            debit,
            D("5.00"),
            1,
        ),
    ]
    assert [e.outcome for e in found] == [None, "deducted", "written_off"]
    assert "written_off: 1 ledger rows" in found[2].memo
    body = periods.journal_json("P", True, found, None)
    assert body["debits"] == body["credits"] == "165.00"
    # Without accounts of their own, they are booked with the rest, as one entry.
    plain = periods.accounts({"promo_accrual": (debit, credit)})
    [one] = periods.entries("P", [matched("V-1", "100.00", "-60.00", "-5.00")], plain)
    assert (one.external_id, one.amount, one.rows, one.outcome) == (
        "settleq:P:promo_accrual:V-1",
        D("35.00"),
        4,
        None,
    )


def test_a_partition_with_only_matches_has_no_entry_for_the_rest() -> None:
    activity = Activity()
    activity.add("deducted", False, D("-7.50"))
    found = periods.entries("P", [Balance("promo_accrual", "V-9", D("7.50"), activity)], DEFAULTS)
    assert [(e.outcome, e.amount) for e in found] == [("deducted", D("7.50"))]
    assert periods.line_entry("P", DEFAULTS, "promo_accrual", "V-9", "deducted") == (
        "settleq:P:promo_accrual:V-9:deducted"
    )
    assert periods.line_entry("P", DEFAULTS, "promo_accrual", "V-9", "posted") == (
        "settleq:P:promo_accrual:V-9"
    )
    assert periods.line_entry("P", DEFAULTS, "recipe_cost", "R", "posted") is None


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
    debit, credit = _pair("promo_accrual")
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
        assert _pair(e.kind) in ((e.debit, e.credit), (e.credit, e.debit))
    assert all(e.kind != "recipe_cost" for e in found)


def test_a_rows_activity_is_one_of_six_sums() -> None:
    assert periods.activity_of("posted", False) == "posted"
    assert periods.activity_of("disputed", False) == "disputed"
    assert periods.activity_of("posted", True) == "repriced"
    assert periods.activity_of("disputed", True) == "repriced"
    assert periods.activity_of("resolved", True) == "resolved"
    assert periods.activity_of("deducted", False) == "deducted"
    assert periods.activity_of("written_off", False) == "written_off"
    with pytest.raises(ValueError, match="outcome"):
        periods.activity_of("refunded", False)


def test_closing_is_opening_plus_all_six_sums() -> None:
    activity = Activity()
    for outcome, again, delta in [
        ("posted", False, "10"),
        ("disputed", False, "4"),
        ("posted", True, "1"),
        ("resolved", True, "-2"),
        ("deducted", False, "-6"),
        ("written_off", False, "-0.5"),
    ]:
        activity.add(outcome, again, D(delta))
    b = Balance("promo_accrual", "V", D("100"), activity)
    assert [activity.sum_of(name) for name in periods.ACTIVITY] == [
        D(x) for x in ("10", "4", "1", "-2", "-6", "-0.5")
    ]
    assert (activity.rows, activity.deducted_rows, activity.written_off_rows) == (6, 1, 1)
    assert b.closing == D("106.5")


def test_direction_is_the_kinds() -> None:
    assert KINDS["promo_accrual"].direction == "owed_to_us"
    assert KINDS["freight_audit"].direction == "owed_by_us"
    assert KINDS["recipe_cost"].direction is None


def test_a_journals_accounting_date_is_a_dated_periods_last_day_else_the_closes() -> None:
    utc, paris = dt.UTC, ZoneInfo("Europe/Paris")
    closed = dt.datetime(2026, 12, 7, 9, 30, tzinfo=utc)
    now = dt.datetime(2026, 12, 8, 23, 30, tzinfo=utc)
    december = dt.datetime(2026, 12, 1, tzinfo=utc)
    assert periods.accounting_date(december, closed, now, utc) == dt.date(2026, 11, 30)
    # Midnight in Paris is 23:00 UTC the day before: still November's last day there.
    in_paris = dt.datetime(2026, 11, 30, 23, tzinfo=utc)
    assert periods.accounting_date(in_paris, closed, now, paris) == dt.date(2026, 11, 30)
    assert periods.accounting_date(None, closed, now, utc) == dt.date(2026, 12, 7)
    # A preview: today, in the periods' zone.
    assert periods.accounting_date(None, None, now, paris) == dt.date(2026, 12, 9)
