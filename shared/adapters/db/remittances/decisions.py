"""A person's decision on a disputed deduction (docs/api.md#remittances-and-deductions),
booked in one transaction, under the same locks as a remittance's match:

- ``accept``: the disputed part written off (a ``written_off`` row against the
  document it was measured against, else the deduction's reference, else the
  remittance's trace);
- ``deny``: nothing booked; the money stays owed by the payer (to recover);
- ``match``: to the named documents and amounts, which must add up to the
  disputed part and take no more than each document has open
  (``deducted`` rows).

A deduction is decided once: the same decision again answers the same; another
is refused. Audited with the operator's token fingerprint.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from shared.adapters.db.ledger.writer import writer_for
from shared.adapters.db.operators import audit
from shared.adapters.db.periods import booking
from shared.adapters.db.remittances.events import DEDUCTION_MATCHED
from shared.adapters.db.remittances.open_documents import OpenDocuments
from shared.adapters.db.remittances.store import (
    booked_rows,
    event_row,
    lock_partition,
)
from shared.adapters.db.remittances.tables import deductions as dd
from shared.adapters.db.remittances.tables import remittances as rm
from shared.adapters.db.tables import outbox
from shared.domain.kinds import DEDUCTION_KIND
from shared.domain.money import ZERO, exact_arithmetic
from shared.domain.remittances.matching import (
    Claim,
    Decision,
    Match,
    MatchingRefused,
    StaleDecision,
    WriteOff,
    apply,
)


class DecisionRefused(Exception):
    """A decision the deduction's state or the documents refuse; ``code`` is the API's."""

    status = 409

    def __init__(self, code: str, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.code, self.status = code, status


@dataclass(frozen=True)
class Request:
    decision: str  # accept, deny or match
    note: str
    matches: tuple[tuple[str, Decimal], ...] = ()  # match: (document_id, amount)

    def detail(self) -> str | None:
        if not self.matches:
            return None
        return json.dumps([{"document_id": d, "amount": format(a, "f")} for d, a in self.matches])


@dataclass
class Decided:
    deduction_id: int
    decision: str
    again: bool  # the same decision was recorded before: nothing booked now
    ledger_rows: list[Any] = field(default_factory=list)


def decide_one(
    engine: Engine, deduction_id: int, request: Request, actor: str, now: dt.datetime
) -> Decided | None:
    """Decide one deduction; None when there is no such deduction."""
    with engine.begin() as conn:
        period = booking.book(conn)
        partition = conn.execute(
            select(dd.c.partition_key).where(dd.c.id == deduction_id)
        ).scalar_one_or_none()
        if partition is None:
            return None
        lock_partition(conn, partition)
        return _decide(conn, deduction_id, request, actor, now, period)


def decide_many(
    engine: Engine,
    request: Request,
    actor: str,
    now: dt.datetime,
    *,
    limit: int,
    partition_key: str | None = None,
    reason_class: str | None = None,
    max_amount: Decimal | None = None,
) -> int:
    """Decide (``accept`` or ``deny``) the oldest disputed, undecided deductions
    the filter selects, at most ``limit``; how many were decided."""
    assert request.decision in ("accept", "deny")
    where = [dd.c.decision.is_(None), dd.c.disputed > ZERO]
    if partition_key is not None:
        where.append(dd.c.partition_key == partition_key)
    if reason_class is not None:
        where.append(dd.c.reason_class == reason_class)
    with engine.begin() as conn:
        period = booking.book(conn)
        found = conn.execute(
            select(dd.c.id, dd.c.partition_key, dd.c.disputed).where(*where).order_by(dd.c.id)
        ).all()
        chosen = [
            (r.id, r.partition_key)
            for r in found
            if max_amount is None or Decimal(r.disputed) <= max_amount
        ][:limit]
        for partition in sorted({p for _, p in chosen}):  # sorted: no two wait in a cycle
            lock_partition(conn, partition)
        decided = 0
        for deduction_id, _ in chosen:
            if not _decide(conn, deduction_id, request, actor, now, period, bulk=True).again:
                decided += 1
        return decided


def _decide(
    conn: Connection,
    deduction_id: int,
    request: Request,
    actor: str,
    now: dt.datetime,
    period: str,
    bulk: bool = False,
) -> Decided:
    row = conn.execute(
        select(dd, rm.c.trace)
        .join(rm, rm.c.id == dd.c.remittance_id)
        .where(dd.c.id == deduction_id)
    ).one()
    if row.decision is not None:
        same = (row.decision, row.decision_note, row.decision_detail) == (
            request.decision,
            request.note,
            request.detail(),
        )
        if same or bulk:
            return Decided(deduction_id, row.decision, again=True)
        raise DecisionRefused(
            "deduction_already_decided",
            f"deduction {deduction_id} was decided before ({row.decision})",
        )
    disputed = Decimal(row.disputed)
    if disputed <= ZERO:
        raise DecisionRefused(
            "deduction_not_disputed", f"deduction {deduction_id} has nothing disputed: it matched"
        )
    claim = Claim(disputed, "promotion", row.reference, row.deducted_on)
    documents = OpenDocuments(conn, DEDUCTION_KIND, row.partition_key)
    decision: Decision | None = None
    if request.decision == "accept":
        against = row.dispute_document_id
        decision = Decision(claim, write_off=WriteOff(against, disputed))
        if against is not None:
            documents.named([against])
    elif request.decision == "match":
        decision = _matched(documents, claim, request.matches, deduction_id)
    rows: list[Any] = []
    if decision is not None:
        ledger = booked_rows(
            deduction_id,
            "decision",
            decision,
            documents.versions,
            row.remittance_id,
            row.partition_key,
            against=row.reference or row.trace,
        )
        rows = writer_for(conn).book_matches(conn, ledger, now, period).rows
    conn.execute(
        update(dd)
        .where(dd.c.id == deduction_id)
        .values(
            decision=request.decision,
            decision_note=request.note,
            decided_by=actor,
            decided_at=now,
            decision_detail=request.detail(),
        )
    )
    audit.record(
        conn,
        actor,
        "deduction.decide",
        f"deduction/{deduction_id}",
        {"decision": request.decision, "note": request.note, "matches": request.detail()},
    )
    if request.decision == "match":
        event = event_row(DEDUCTION_MATCHED, row.remittance_id, row.partition_key, now)
        conn.execute(outbox.insert().values(**event))
    return Decided(deduction_id, request.decision, again=False, ledger_rows=rows)


def _matched(
    documents: OpenDocuments,
    claim: Claim,
    matches: Sequence[tuple[str, Decimal]],
    deduction_id: int,
) -> Decision:
    if not matches:
        raise DecisionRefused("match_invalid", "a match names its documents and amounts", 422)
    with exact_arithmetic():
        total = sum((amount for _, amount in matches), ZERO)
    if total != claim.amount:
        raise DecisionRefused(
            "match_invalid",
            f"the matches add up to {total}, not the {claim.amount} disputed on"
            f" deduction {deduction_id}",
            422,
        )
    documents.named(d for d, _ in matches)
    unknown = [d for d, _ in matches if d not in documents.known]
    if unknown:
        raise DecisionRefused(
            "match_invalid",
            f"document {unknown[0]} is no settled accrual document of the payer's partition",
            422,
        )
    try:
        decision = Decision(claim, tuple(Match(d, a) for d, a in matches))
        apply([documents.known[d] for d in dict.fromkeys(d for d, _ in matches)], decision)
    except StaleDecision as exc:
        raise DecisionRefused("match_exceeds_open", str(exc)) from None
    except MatchingRefused as exc:
        raise DecisionRefused("match_invalid", str(exc), 422) from None
    return decision
