"""Where a deduction stands (docs/api.md#remittances-and-deductions), derived
from how its match left it and a person's decision, never stored:

- ``matched``: every cent of it was matched (an excess within tolerance
  written off with the match), or a person matched its disputed part;
- ``written_off``: a person accepted its disputed part (written off);
- ``denied``: a person denied it: the money stays owed by the payer, to recover;
- ``disputed``: part of it waits for a person's decision.

``open`` names what is still outstanding, as the aging counts it: disputed or
denied. Its open amount is its disputed part.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Literal, get_args

from shared.domain.money import ZERO

Status = Literal["matched", "written_off", "denied", "disputed"]
STATUSES: Final = get_args(Status)
Filter = Literal["open", "matched", "written_off", "denied", "disputed", "all"]
FILTERS: Final = get_args(Filter)
OUTSTANDING: Final[tuple[Status, ...]] = ("disputed", "denied")
Decision = Literal["accept", "deny", "match"]
DECISIONS: Final = get_args(Decision)
_DECIDED: Final[dict[str, Status]] = {"accept": "written_off", "deny": "denied", "match": "matched"}


def status_of(disputed: Decimal, decision: str | None) -> Status:
    if decision is not None:
        return _DECIDED[decision]
    return "disputed" if disputed > 0 else "matched"


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a deduction's money is now: a decision moves its disputed part to
    where it went (a match's to ``matched``, an accept's to ``written_off``); a
    denied part stays ``disputed``, owed by the payer."""

    matched: Decimal
    written_off: Decimal
    disputed: Decimal
    status: Status


def standing(
    matched: Decimal, written_off: Decimal, disputed: Decimal, decision: str | None
) -> Standing:
    status = status_of(disputed, decision)
    if decision == "match":
        return Standing(matched + disputed, written_off, ZERO, status)
    if decision == "accept":
        return Standing(matched, written_off + disputed, ZERO, status)
    return Standing(matched, written_off, disputed, status)


def statuses_of(wanted: Filter) -> tuple[Status, ...]:
    """The statuses a filter selects."""
    if wanted == "all":
        return STATUSES
    if wanted == "open":
        return OUTSTANDING
    return (wanted,)
