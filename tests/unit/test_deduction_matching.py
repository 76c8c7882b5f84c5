"""shared/domain/remittances/matching.py: the matching rule, each
decision taken where §3.12 is silent, and the invariant its guarantee rests on
(matched + written off + disputed is the deduction; a match never takes more
than is open; only a write-off takes a document below zero)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.remittances.matching import (
    Claim,
    Decision,
    Dispute,
    Match,
    MatchingRefused,
    OpenDocument,
    StaleDecision,
    Tolerance,
    WriteOff,
    amount_window,
    apply,
    decide,
)

D = Decimal
DAY = date(2026, 7, 1)
T0 = datetime(2026, 1, 1)


def claim(amount: str, reference: str | None = None, reason_class: str = "promotion") -> Claim:
    return Claim(D(amount), reason_class, reference, DAY)


def doc(document_id: str, open_amount: str, age_days: int = 0) -> OpenDocument:
    """A document settled ``age_days`` before the newest (a larger age is older)."""
    return OpenDocument(document_id, D(open_amount), T0 - timedelta(days=age_days))


# --- the rule, §3.12 -------------------------------------------------------------


def test_a_reference_naming_a_settled_document_takes_from_it() -> None:
    documents = [doc("A", "100.00", age_days=9), doc("B", "250.00")]
    decision = decide(claim("250.00", reference="B"), documents)
    assert decision == Decision(claim("250.00", "B"), (Match("B", D("250.00")),))


def test_a_reference_wins_over_an_older_document_of_the_same_amount() -> None:
    documents = [doc("OLD", "40.00", age_days=30), doc("NEW", "40.00")]
    assert decide(claim("40.00", reference="NEW"), documents).matches == (Match("NEW", D("40.00")),)


def test_without_a_reference_the_deduction_takes_from_a_document_of_its_amount() -> None:
    documents = [doc("A", "75.10"), doc("B", "80.00")]
    assert decide(claim("80.00"), documents).matches == (Match("B", D("80.00")),)


def test_by_amount_the_oldest_document_within_tolerance_goes_first() -> None:
    documents = [doc("NEW", "80.00", age_days=1), doc("OLD", "80.00", age_days=5)]
    first = decide(claim("80.00"), documents)
    assert first.matches == (Match("OLD", D("80.00")),)
    second = decide(claim("80.00"), apply(documents, first))
    assert second.matches == (Match("NEW", D("80.00")),)


def test_an_excess_within_tolerance_is_written_off_against_the_document() -> None:
    decision = decide(claim("101.50", "A"), [doc("A", "100.00")], Tolerance(absolute=D("2")))
    assert decision.matches == (Match("A", D("100.00")),)
    assert decision.write_off == WriteOff("A", D("1.50"))
    assert decision.dispute is None


def test_an_excess_above_tolerance_is_an_over_deduction_dispute() -> None:
    decision = decide(claim("110.00", "A"), [doc("A", "100.00")], Tolerance(absolute=D("2")))
    assert decision.matches == (Match("A", D("100.00")),)
    assert decision.write_off is None
    assert decision.dispute == Dispute(D("10.00"), "over_deduction", "A")


def test_every_class_but_promotion_is_a_dispute() -> None:
    documents = [doc("A", "100.00")]
    for reason_class in ("pricing", "shortage", "damage", "return", "unexplained", "other"):
        decision = decide(claim("100.00", "A", reason_class), documents, Tolerance(D("5")))
        assert decision.matches == () and decision.write_off is None
        assert decision.dispute == Dispute(D("100.00"), "not_promotion")


def test_a_deduction_no_document_is_near_is_unmatched() -> None:
    decision = decide(claim("55.00"), [doc("A", "100.00"), doc("B", "20.00")])
    assert decision.dispute == Dispute(D("55.00"), "unmatched")
    assert decision.matches == ()


def test_with_no_documents_a_deduction_is_unmatched() -> None:
    assert decide(claim("1.00"), []).dispute == Dispute(D("1.00"), "unmatched")


# --- where §3.12 is silent -------------------------------------------------------


def test_with_both_tolerances_set_the_smaller_limit_applies() -> None:
    both = Tolerance(absolute=D("10.00"), percent=D("2"))
    # On 100.00 open, 2 % is 2.00: smaller than 10.00.
    assert both.limit(D("100.00")) == D("2.00")
    # On 1000.00 open, 2 % is 20.00: 10.00 is the smaller.
    assert both.limit(D("1000.00")) == D("10.00")
    over = decide(claim("103.00", "A"), [doc("A", "100.00")], both)
    assert over.dispute == Dispute(D("3.00"), "over_deduction", "A")
    within = decide(claim("102.00", "A"), [doc("A", "100.00")], both)
    assert within.write_off == WriteOff("A", D("2.00"))


def test_a_tolerance_left_at_zero_is_unset_so_the_other_alone_applies() -> None:
    assert Tolerance(absolute=D("5")).limit(D("1000")) == D("5")
    assert Tolerance(percent=D("1")).limit(D("1000")) == D("10.00")
    assert Tolerance().limit(D("1000")) == D("0")


def test_percent_is_points_of_the_open_amount_rounded_once_half_up_at_a_cent() -> None:
    # 1.5 % of 33.30 is 0.4995: 0.50 half up (never 0.49, never 0.4995).
    assert Tolerance(percent=D("1.5")).limit(D("33.30")) == D("0.50")
    # 2.5 % of 0.10 is 0.0025: 0.00, so only the exact amount matches.
    assert Tolerance(percent=D("2.5")).limit(D("0.10")) == D("0.00")
    decision = decide(claim("33.80", "A"), [doc("A", "33.30")], Tolerance(percent=D("1.5")))
    assert decision.write_off == WriteOff("A", D("0.50"))


def test_the_tolerance_boundary_is_within() -> None:
    tolerance = Tolerance(absolute=D("0.05"))
    at = decide(claim("10.05"), [doc("A", "10.00")], tolerance)
    assert at.write_off == WriteOff("A", D("0.05"))
    past = decide(claim("10.06"), [doc("A", "10.00")], tolerance)
    assert past.dispute == Dispute(D("10.06"), "unmatched")


def test_by_amount_a_deduction_just_below_the_open_amount_matches_and_leaves_it_open() -> None:
    documents = [doc("A", "100.00")]
    decision = decide(claim("99.00"), documents, Tolerance(absolute=D("1")))
    assert decision.matches == (Match("A", D("99.00")),)
    assert decision.write_off is None and decision.dispute is None
    assert apply(documents, decision)[0].open_amount == D("1.00")


def test_by_reference_a_partial_deduction_leaves_the_document_open() -> None:
    documents = [doc("A", "100.00")]
    decision = decide(claim("30.00", "A"), documents)
    assert decision == Decision(claim("30.00", "A"), (Match("A", D("30.00")),))
    assert apply(documents, decision)[0].open_amount == D("70.00")


def test_by_amount_never_adds_documents_up() -> None:
    # 60 + 40 is 100, but a sum of documents is a person's `match`, not the rule's.
    decision = decide(claim("100.00"), [doc("A", "60.00"), doc("B", "40.00")])
    assert decision.dispute == Dispute(D("100.00"), "unmatched")


def test_ties_in_age_go_by_document_id_whatever_the_order_given() -> None:
    documents = [doc("B", "50.00"), doc("A", "50.00"), doc("C", "50.00")]
    for order in (documents, documents[::-1], sorted(documents, key=lambda d: d.document_id)):
        assert decide(claim("50.00"), order).matches == (Match("A", D("50.00")),)


def test_the_oldest_within_tolerance_wins_over_a_newer_exact_amount() -> None:
    documents = [doc("OLD", "98.00", age_days=10), doc("EXACT", "100.00")]
    decision = decide(claim("100.00"), documents, Tolerance(absolute=D("2")))
    assert decision.matches == (Match("OLD", D("98.00")),)
    assert decision.write_off == WriteOff("OLD", D("2.00"))


@pytest.mark.parametrize("open_amount", ["0.00", "-3.00"])
def test_a_reference_to_a_document_with_nothing_open_is_an_over_deduction(
    open_amount: str,
) -> None:
    # Another open document of the very amount is not taken instead: the payer
    # named a document already deducted, most likely the same promotion twice.
    documents = [doc("SPENT", open_amount), doc("OTHER", "25.00")]
    decision = decide(claim("25.00", "SPENT"), documents, Tolerance(absolute=D("100")))
    assert decision.matches == () and decision.write_off is None
    assert decision.dispute == Dispute(D("25.00"), "over_deduction", "SPENT")


def test_a_reference_naming_no_document_of_the_partition_is_matched_by_amount() -> None:
    decision = decide(claim("25.00", "INV-ELSEWHERE"), [doc("A", "25.00")])
    assert decision.matches == (Match("A", D("25.00")),)


def test_tolerance_never_writes_off_a_deduction_that_matched_nothing() -> None:
    # Within the absolute limit, but nothing was open to match: no write-off.
    decision = decide(claim("0.50", "A"), [doc("A", "0.00")], Tolerance(absolute=D("1")))
    assert decision.write_off is None
    assert decision.dispute == Dispute(D("0.50"), "over_deduction", "A")


def test_documents_written_below_zero_are_not_open_for_matching_by_amount() -> None:
    assert decide(claim("5.00"), [doc("A", "-5.00")], Tolerance(D("20"))).dispute == Dispute(
        D("5.00"), "unmatched"
    )


@pytest.mark.parametrize("amount", ["0", "0.00", "-1.00", "NaN", "Infinity"])
def test_a_deduction_that_is_not_a_positive_amount_is_refused(amount: str) -> None:
    with pytest.raises(MatchingRefused, match="deduction's amount"):
        claim(amount)


@pytest.mark.parametrize("amount", ["0.00001", "1000000000000"])
def test_a_deduction_outside_the_wires_limits_is_refused_not_rounded(amount: str) -> None:
    with pytest.raises(MatchingRefused, match="out of range"):
        claim(amount)


def test_a_tolerance_outside_the_wires_limits_is_refused() -> None:
    with pytest.raises(MatchingRefused, match="tolerance absolute out of range"):
        Tolerance(absolute=D("0.00001"))
    with pytest.raises(MatchingRefused, match="tolerance percent out of range"):
        Tolerance(percent=D("0.0000001"))
    assert Tolerance(percent=D("0.000001")).limit(D("1000000")) == D("0.01")


def test_a_negative_tolerance_is_refused() -> None:
    with pytest.raises(MatchingRefused, match="must not be negative"):
        Tolerance(absolute=D("-1"))
    with pytest.raises(MatchingRefused, match="must not be negative"):
        Tolerance(percent=D("-0.5"))


def test_a_tolerance_past_the_whole_open_amount_is_refused() -> None:
    Tolerance(percent=D("100"))
    with pytest.raises(MatchingRefused, match="at most 100"):
        Tolerance(percent=D("100.000001"))


def test_a_float_is_refused_where_money_goes() -> None:
    with pytest.raises(MatchingRefused, match="finite Decimal"):
        Claim(1.5, "promotion", None, DAY)  # type: ignore[arg-type]


def test_two_documents_of_one_id_are_refused() -> None:
    with pytest.raises(MatchingRefused, match="listed twice"):
        decide(claim("1.00"), [doc("A", "1.00"), doc("A", "2.00")])
    with pytest.raises(MatchingRefused, match="listed twice"):
        decide(claim("1.00"), [doc("A", "1.00")] * 2)


def test_a_decision_whose_parts_do_not_add_up_cannot_be_built() -> None:
    with pytest.raises(MatchingRefused, match="add up"):
        Decision(claim("10.00"), (Match("A", D("9.99")),))
    with pytest.raises(MatchingRefused, match="positive"):
        Decision(claim("10.00"), (Match("A", D("10.00")), Match("B", D("0"))))


def test_apply_refuses_a_decision_made_on_other_open_amounts() -> None:
    decision = decide(claim("50.00", "A"), [doc("A", "50.00")])
    with pytest.raises(StaleDecision, match="has 20.00 open"):
        apply([doc("A", "20.00")], decision)
    with pytest.raises(StaleDecision, match="not among"):
        apply([doc("B", "50.00")], decision)


def test_apply_takes_a_write_off_below_zero_and_keeps_the_order() -> None:
    documents = [doc("B", "5.00"), doc("A", "100.00")]
    decision = decide(claim("101.00", "A"), documents, Tolerance(D("1")))
    assert apply(documents, decision) == (doc("B", "5.00"), doc("A", "-1.00"))


# --- properties -----------------------------------------------------------------

_CENTS = st.integers(min_value=-5_000, max_value=50_000).map(lambda c: D(c).scaleb(-2))
# Open amounts as the ledger may hold them: sums of rows of four places.
_BASIS_POINTS = st.integers(min_value=-50_000, max_value=500_000).map(lambda c: D(c).scaleb(-4))
_TAKEN = st.integers(min_value=1, max_value=60_000).map(lambda c: D(c).scaleb(-2))
_TOLERANCES = st.builds(
    Tolerance,
    absolute=st.sampled_from(["0", "0.01", "0.50", "5", "25.00"]).map(D),
    percent=st.sampled_from(["0", "0.5", "1", "2.5", "10"]).map(D),
)
_IDS = [f"DOC-{n}" for n in range(8)]


@st.composite
def _documents(draw: st.DrawFn) -> list[OpenDocument]:
    ids = draw(st.lists(st.sampled_from(_IDS), unique=True, max_size=len(_IDS)))
    return [
        # Few distinct ages, so ties in age are common.
        OpenDocument(i, draw(_CENTS), T0 + timedelta(days=draw(st.integers(0, 3))))
        for i in ids
    ]


_CLAIMS = st.builds(
    Claim,
    amount=_TAKEN,
    reason_class=st.sampled_from(["promotion", "promotion", "promotion", "pricing", "other"]),
    reference=st.one_of(st.none(), st.sampled_from([*_IDS, "UNKNOWN"])),
    date=st.just(DAY),
)


def _check_invariant(
    before: Sequence[OpenDocument], decision: Decision, tolerance: Tolerance
) -> None:
    assert decision.matched + decision.written_off + decision.disputed == decision.claim.amount
    opened = {d.document_id: d.open_amount for d in before}
    for match in decision.matches:
        assert D(0) < match.amount <= opened[match.document_id]
    if decision.write_off is not None:
        assert decision.matches, "a write-off without a match"
        (match,) = decision.matches
        assert decision.write_off.document_id == match.document_id
        assert decision.write_off.amount <= tolerance.limit(opened[match.document_id])
    if decision.claim.reason_class != "promotion":
        assert decision.dispute == Dispute(decision.claim.amount, "not_promotion")
    after = {d.document_id: d.open_amount for d in apply(before, decision)}
    for document_id, open_before in opened.items():
        if decision.write_off is None or decision.write_off.document_id != document_id:
            # No write-off here: the document does not fall below zero (or below
            # where it was, if it already was).
            assert after[document_id] >= min(open_before, D(0))


@given(_documents(), _CLAIMS, _TOLERANCES)
def test_every_decision_adds_up_and_never_takes_more_than_is_open(
    documents: list[OpenDocument], deduction: Claim, tolerance: Tolerance
) -> None:
    _check_invariant(documents, decide(deduction, documents, tolerance), tolerance)


@given(_documents(), st.lists(_CLAIMS, max_size=30), _TOLERANCES)
def test_deductions_in_sequence_never_match_more_than_a_document_had_open(
    documents: list[OpenDocument], deductions: list[Claim], tolerance: Tolerance
) -> None:
    initial = {d.document_id: d.open_amount for d in documents}
    matched = dict.fromkeys(initial, D(0))
    written_off = dict.fromkeys(initial, D(0))
    current = documents
    for deduction in deductions:
        decision = decide(deduction, current, tolerance)
        _check_invariant(current, decision, tolerance)
        for match in decision.matches:
            matched[match.document_id] += match.amount
        if decision.write_off is not None and decision.write_off.document_id is not None:
            written_off[decision.write_off.document_id] += decision.write_off.amount
        current = list(apply(current, decision))
    for d in current:
        i = d.document_id
        assert matched[i] <= max(initial[i], D(0))
        assert d.open_amount == initial[i] - matched[i] - written_off[i]


@given(_documents(), _CLAIMS, _TOLERANCES, st.randoms(use_true_random=False))
def test_the_same_input_gives_the_same_decision_in_any_order(
    documents: list[OpenDocument], deduction: Claim, tolerance: Tolerance, rng: random.Random
) -> None:
    first = decide(deduction, documents, tolerance)
    shuffled = documents[:]
    rng.shuffle(shuffled)
    assert decide(deduction, shuffled, tolerance) == first
    assert decide(deduction, tuple(documents), tolerance) == first


@given(_documents(), _CLAIMS, _TOLERANCES)
def test_a_promotion_takes_from_the_named_document_else_the_oldest_near_one(
    documents: list[OpenDocument], deduction: Claim, tolerance: Tolerance
) -> None:
    decision = decide(deduction, documents, tolerance)
    if deduction.reason_class != "promotion":
        return
    ids = {d.document_id for d in documents}
    touched = {m.document_id for m in decision.matches}
    if decision.dispute is not None and decision.dispute.document_id is not None:
        touched.add(decision.dispute.document_id)
    if deduction.reference in ids:
        assert touched == {deduction.reference}
        return
    near = [
        d
        for d in documents
        if d.open_amount > 0
        and abs(deduction.amount - d.open_amount) <= tolerance.limit(d.open_amount)
    ]
    if not near:
        assert decision.dispute == Dispute(deduction.amount, "unmatched")
        return
    oldest = min(near, key=lambda d: (d.settled_at, d.document_id))
    assert touched == {oldest.document_id}
    assert decision.dispute is None


def test_the_amount_window_of_each_tolerance() -> None:
    assert amount_window(D("100.00"), Tolerance()) == (D("100.00"), D("100.00"))
    assert amount_window(D("100.00"), Tolerance(absolute=D("2"))) == (D("98.00"), D("102.00"))
    # 99.995 / 1.1 = 90.90454..., 100.005 / 0.9 = 111.11666..., rounded outward.
    low, high = amount_window(D("100.00"), Tolerance(percent=D("10")))
    assert (low, high) == (D("90.9045"), D("111.1167"))
    # 1 % of 0.50 is 0.005, a cent half up: 0.49 is near 0.50 only by that
    # rounding, and the window keeps 0.50 in.
    one = Tolerance(percent=D("1"))
    assert decide(claim("0.49"), [doc("A", "0.50")], one).matches == (Match("A", D("0.49")),)
    assert amount_window(D("0.49"), one)[1] == D("0.5000")
    # 100 % and more: any open amount at or above the floor may be near.
    assert amount_window(D("100.00"), Tolerance(percent=D("100")))[1] is None
    both = amount_window(D("100.00"), Tolerance(absolute=D("1"), percent=D("100")))
    assert both == (D("99.00"), D("101.00"))


_WIDE_TOLERANCES = st.builds(
    Tolerance,
    absolute=st.sampled_from(["0", "0.01", "0.50", "5", "25.00"]).map(D),
    percent=st.sampled_from(["0", "0.5", "1", "2.5", "33.333333", "99.9", "100"]).map(D),
)


@given(
    st.lists(
        st.builds(
            OpenDocument,
            document_id=st.sampled_from(_IDS),
            open_amount=_BASIS_POINTS,
            settled_at=st.just(T0),
        ),
        unique_by=lambda d: d.document_id,
    ),
    _CLAIMS,
    _WIDE_TOLERANCES,
)
def test_deciding_on_the_amount_window_alone_decides_as_on_every_document(
    documents: list[OpenDocument], deduction: Claim, tolerance: Tolerance
) -> None:
    low, high = amount_window(deduction.amount, tolerance)
    windowed = [
        d
        for d in documents
        if d.document_id == deduction.reference
        or (low <= d.open_amount and (high is None or d.open_amount <= high))
    ]
    assert decide(deduction, windowed, tolerance) == decide(deduction, documents, tolerance)
    for d in documents:
        near = abs(deduction.amount - d.open_amount) <= tolerance.limit(d.open_amount)
        if d.open_amount > 0 and near:
            assert d in windowed
