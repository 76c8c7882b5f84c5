"""Where a deduction stands (shared/domain/remittances/status.py): derived
from how its match left it and a person's decision, which moves its disputed
part to where it went; the filters select what the aging calls open."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from shared.domain.remittances.status import Standing, standing, statuses_of


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (None, Standing(D("60"), D("0.50"), D("15"), "disputed")),
        ("match", Standing(D("75"), D("0.50"), D("0"), "matched")),
        ("accept", Standing(D("60"), D("15.50"), D("0"), "written_off")),
        ("deny", Standing(D("60"), D("0.50"), D("15"), "denied")),
    ],
)
def test_a_decision_moves_the_disputed_part_where_it_went(
    decision: str | None, expected: Standing
) -> None:
    assert standing(D("60"), D("0.50"), D("15"), decision) == expected


def test_a_deduction_matched_in_full_on_receipt_is_matched() -> None:
    assert standing(D("45"), D("0"), D("0"), None).status == "matched"


def test_open_is_what_the_payer_still_owes_and_all_is_every_status() -> None:
    assert statuses_of("open") == ("disputed", "denied")
    assert set(statuses_of("all")) == {"matched", "written_off", "denied", "disputed"}
    assert statuses_of("denied") == ("denied",)
