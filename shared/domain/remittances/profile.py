"""What a payer's partner profile says about its remittances
(docs/architecture.md#remittances-and-deductions): the partition its
deductions are matched in, its tolerance, its own reason codes and the days a
deduction may be disputed in. A payer with no profile (a JSON remittance's
partition that no profile names) gets the defaults: tolerance 0, 30 days,
X12 element 426's classes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shared.domain.remittances.matching import Tolerance

DEFAULT_WINDOW_DAYS = 30


@dataclass(frozen=True)
class Profile:
    partition_key: str
    tolerance: Tolerance = Tolerance()
    reasons: Mapping[str, str] = field(default_factory=dict)
    window_days: int = DEFAULT_WINDOW_DAYS
    partner: tuple[str, str] | None = None  # its ISA05/ISA06, if it has a profile

    def due_on(self, deducted_on: dt.date) -> dt.date:
        """When a deduction of ``deducted_on`` must be disputed by."""
        return deducted_on + dt.timedelta(days=self.window_days)


def tolerance_of(stored: Mapping[str, Any] | None) -> Tolerance:
    """A profile's stored tolerance ({"absolute", "percent"}, money strings; any absent is 0)."""
    stored = stored or {}
    return Tolerance(
        absolute=Decimal(stored.get("absolute") or "0"),
        percent=Decimal(stored.get("percent") or "0"),
    )
