"""The dispute queue in the ledger database
(docs/architecture.md#exactly-once-resolution).

A dispute is its disputed ledger row (its id is that row's id); its status is
derived when read (disputes/sql.py). The interface the API, CLI, dashboard,
metrics and bench code against: the value types (disputes/types.py), the
reads (disputes/reads.py) and the resolutions (disputes/resolve.py):

- ``page(engine, where, *, after_id, limit)``: oldest first (ascending id);
  the cursor is the id of the last dispute seen.
- ``stream(engine, where)``: every matching dispute, oldest first, never all
  in memory (the CSV export of 100,000 disputes).
- ``get(engine, dispute_id)``: None when no disputed ledger row has this id.
- ``stats(engine)`` (per status and kind, the top partitions, the oldest open
  one: also the /metrics gauges' one reading), ``statuses(engine, ids)`` (a
  job's lines page).
- ``resolve(engine, dispute_id, request, actor)``: resolve one dispute, at
  most once whatever is repeated or raced: in one transaction the
  ``resolved`` ledger row and its outcome event (outbox), booked by the
  ledger writer, its resolution record and the audit entry
  ``dispute_resolve``. Raises ``LookupError`` for an
  unknown id, ``DisputeSuperseded`` for a superseded dispute,
  ``DisputeAlreadyResolved`` for a resolved one whose resolution differs
  (``same_resolution``), ``DecidedAmountOutOfRange`` when the decided amount
  does not fit the ledger; an identical one is answered again with
  ``created=False``.
- ``resolve_bulk(engine, where, request, limit, actor)``: resolve up to
  ``limit`` open disputes matching ``where`` (oldest first) with one decision
  (``BULK_DECISIONS``), each exactly as ``resolve`` would; returns how many
  this call resolved (those resolved or superseded meanwhile are skipped, and
  so is an ``accept_claim`` whose change from the model would not fit the
  ledger). Raises ``ValueError`` for another decision or a limit outside 1 to
  ``BULK_LIMIT_MAX``.
"""

from __future__ import annotations

from shared.adapters.db.disputes.reads import get, page, stats, statuses, stream
from shared.adapters.db.disputes.resolve import resolve, resolve_bulk
from shared.adapters.db.disputes.types import (
    Dispute,
    Filter,
    PartitionVariance,
    Resolution,
    Resolved,
    Stats,
    Totals,
)

__all__ = [
    "Dispute",
    "Filter",
    "PartitionVariance",
    "Resolution",
    "Resolved",
    "Stats",
    "Totals",
    "get",
    "page",
    "resolve",
    "resolve_bulk",
    "stats",
    "statuses",
    "stream",
]
