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

from decimal import Decimal
from typing import Final, Literal, get_args

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


def statuses_of(wanted: Filter) -> tuple[Status, ...]:
    """The statuses a filter selects."""
    if wanted == "all":
        return STATUSES
    if wanted == "open":
        return OUTSTANDING
    return (wanted,)
