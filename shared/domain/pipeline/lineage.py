"""Where a document, or a ledger row, stands in its identity's lineage: pure.

An identity's lineage is its ledger rows in commit order
(docs/architecture.md#re-pricing-lineage-and-advisory-locks): the same
reconciliation key (promo, freight) or the same (recipe, location). A new row
supersedes the newest; a document older than the newest changes nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from shared.domain.kinds.base import DeltaBasis, Document

# The reason of a line whose document is older than what its identity already
# has (``Standing.older_than``): a duplicate that changes nothing.
NEWER_VERSION_SETTLED = "newer_version_settled"
# The reason of a duplicate whose claim is not its ledger row's: the producer
# sent the line again with the claim changed (a correction the ledger did not take).
CLAIMED_AMOUNT_DIFFERS = "claimed_amount_differs"


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a document, or a ledger row, stands in its identity's lineage
    (docs/architecture.md#re-pricing-lineage-and-advisory-locks): by contract
    version (``key_versions``: promo, freight), by ``effective_at``
    (``line_history``: a recipe request's cost applies from then)."""

    contract_version: int
    # None for a row of another kind; and for a recipe row written before
    # migration 0017, which then stands before every request, as then.
    effective_at: dt.datetime | None = None

    @classmethod
    def of(cls, document: Document) -> Standing:
        return cls(document.contract_version, getattr(document, "effective_at", None))

    def key(self, basis: DeltaBasis) -> tuple[int, dt.datetime]:
        """The lineage's order: a unit's new rows of one lineage are written in
        it (``priors.rounds``), so two versions in one batch chain v1 -> v2."""
        if basis == "line_history":
            return 0, self.effective_at or _EPOCH
        return self.contract_version, _EPOCH

    def older_than(self, newest: Standing, basis: DeltaBasis) -> bool:
        """Is a document standing here older than its lineage's newest row? Then
        it changes nothing: its lines are duplicates (``NEWER_VERSION_SETTLED``)
        and the newer row, with its open dispute, still counts. Strictly: the
        same version is the identity itself (the unique index's duplicate), the
        same instant a new cost."""
        return self.key(basis) < newest.key(basis)


_EPOCH = dt.datetime.min.replace(tzinfo=dt.UTC)
