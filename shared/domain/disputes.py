"""Disputes: a disputed ledger row waiting for a person's decision
(docs/architecture.md#exactly-once-resolution).

Pure rules only. A dispute *is* its disputed ledger row (its id is that row's
id); its status is derived, never stored on the row, which never changes:
``resolved`` once a ``resolved`` ledger row supersedes it, ``superseded`` once
the same identity was settled again after it (the newer row is what counts),
else ``open``. A resolution appends one ``resolved`` row whose amount is the
decided amount and whose delta is ``decided - disputed amount``, so an
identity's deltas still add up to its amount now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Literal

from shared.domain.pipeline.settlement import LEDGER_LIMIT

Decision = Literal["accept_claim", "accept_model", "settle_at"]
DECISIONS: tuple[Decision, ...] = ("accept_claim", "accept_model", "settle_at")
# A bulk resolution decides many disputes at once: only from amounts each one holds.
BULK_DECISIONS: tuple[Decision, ...] = ("accept_claim", "accept_model")

Status = Literal["open", "resolved", "superseded"]
STATUSES: tuple[Status, ...] = ("open", "resolved", "superseded")

NOTE_MAX_CHARS = 2000
# The characters that show nothing, which alone do not make a note say
# anything: whitespace and Unicode's controls (Cc), format characters (Cf:
# U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER, U+FEFF...) and separators (Zs,
# Zl, Zp), as Unicode 14 (Python 3.11) has them; tests/unit/test_notes.py
# holds this list to unicodedata. Written as ranges, so that the published
# schema's pattern (NOTE_PATTERN) and the server's check are one rule.
BLANK_RANGES = (
    (0x0000, 0x0020), (0x007F, 0x00A0), (0x00AD, 0x00AD), (0x0600, 0x0605),
    (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891),
    (0x08E2, 0x08E2), (0x1680, 0x1680), (0x180E, 0x180E), (0x2000, 0x200F),
    (0x2028, 0x202F), (0x205F, 0x2064), (0x2066, 0x206F), (0x3000, 0x3000),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)  # fmt: skip
# The characters themselves (not escapes), so the pattern reads the same in
# every regex dialect a client generator may use.
_BLANK = "".join(chr(lo) if lo == hi else f"{chr(lo)}-{chr(hi)}" for lo, hi in BLANK_RANGES)
# A note as published: no NUL (PostgreSQL cannot store one) and one visible character.
NOTE_PATTERN = f"^[^\x00]*[^{_BLANK}][^\x00]*$"
_VISIBLE = re.compile(f"[^{_BLANK}]")


def says_something(note: str) -> bool:
    """Whether an operator's note (a resolution's, a discard's) holds at least
    one visible character: whitespace and Unicode format characters alone do
    not count (docs/api.md#disputes)."""
    return _VISIBLE.search(note) is not None


BULK_LIMIT_MAX = 10_000

LEDGER_SCALE = Decimal("0.0001")  # the ledger's 4 places
_WIDE = Context(prec=60)  # quantizes any amount the checks below can meet


class DisputeConflict(Exception):
    """A resolution the dispute's state refuses; ``code`` is the API's machine code."""

    code = "dispute_conflict"


class DisputeAlreadyResolved(DisputeConflict):
    code = "dispute_already_resolved"


class DisputeSuperseded(DisputeConflict):
    code = "dispute_superseded"


class DecidedAmountOutOfRange(ValueError):
    """The decided amount does not fit the ledger (``NUMERIC(20,4)``): more than
    4 places, or it or its change from the disputed amount is not below 10**16.
    The API answers it 422 with ``code``."""

    code = "amount_out_of_range"


def check_decided(amount: Decimal, model: Decimal) -> None:
    """Raise ``DecidedAmountOutOfRange`` unless a resolved row of ``amount`` fits
    the ledger beside its disputed row of ``model`` (its delta is the difference)."""
    if not amount.is_finite() or amount != amount.quantize(LEDGER_SCALE, context=_WIDE):
        raise DecidedAmountOutOfRange("a decided amount has at most 4 decimal places")
    if abs(amount) >= LEDGER_LIMIT or abs(amount - model) >= LEDGER_LIMIT:
        raise DecidedAmountOutOfRange(
            "the decided amount, or its change from the disputed amount, does not fit the ledger"
        )


@dataclass(frozen=True)
class ResolveRequest:
    """What an operator decided; ``amount`` only (and always) for ``settle_at``."""

    decision: Decision
    note: str
    amount: Decimal | None = None

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(f"unknown decision {self.decision!r}")
        if (self.amount is None) != (self.decision != "settle_at"):
            raise ValueError("settle_at takes an amount; the other decisions take none")
        if not 1 <= len(self.note) <= NOTE_MAX_CHARS or not says_something(self.note):
            raise ValueError(f"a note is 1 to {NOTE_MAX_CHARS} characters, one of them visible")


def decided_amount(request: ResolveRequest, claimed: Decimal, model: Decimal) -> Decimal:
    """The amount a resolution pays: the claim, the contract's model, or the one given."""
    if request.decision == "accept_claim":
        return claimed
    if request.decision == "accept_model":
        return model
    assert request.amount is not None  # ResolveRequest guarantees it
    return request.amount


def variance(claimed: Decimal, model: Decimal) -> Decimal:
    """How far the claim is from the model (positive: the claim asks for more)."""
    return claimed - model


def status_of(*, resolved: bool, superseded: bool) -> Status:
    """A resolution closes a dispute for good, even if its identity is settled again later."""
    if resolved:
        return "resolved"
    return "superseded" if superseded else "open"


def same_resolution(
    request: ResolveRequest, decision: str, amount: Decimal, claimed: Decimal, model: Decimal
) -> bool:
    """Whether a repeated request asks for the resolution already made (then it
    answers that resolution again) rather than a different one (a conflict).
    The note does not decide it: a retry may carry a reworded note."""
    return request.decision == decision and decided_amount(request, claimed, model) == amount
