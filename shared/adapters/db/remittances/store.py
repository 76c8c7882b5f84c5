"""A remittance recorded and its deductions matched, in one transaction
(docs/architecture.md#remittances-and-deductions).

In order: the booking lock (the rows go in the period open at commit, and a
close waits for them), the remittance's row (its unique key, payer and trace
decide a replay or a race: the second insert waits for the first's commit,
then inserts nothing), the payer partition's match lock (remittances and
decisions of one partition match one at a time, so the matches to a document
never add up to more than its open amount), then each deduction decided
(``shared.domain.remittances.matching``) against the open amounts this
transaction sees and changes, its row, and the ledger rows its matches and
write-offs book through the one ledger writer, with their outbox rows and
the remittance's webhook events. A process killed anywhere before the commit
leaves nothing; the sender's retry of the same file then records it once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, text

from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.ledger.writer import writer_for
from shared.adapters.db.periods import booking
from shared.adapters.db.remittances.events import (
    DEDUCTION_DISPUTED,
    DEDUCTION_MATCHED,
    REMITTANCE_RECEIVED,
)
from shared.adapters.db.remittances.open_documents import OpenDocuments
from shared.adapters.db.remittances.tables import deductions as dd
from shared.adapters.db.remittances.tables import remittances as rm
from shared.adapters.db.tables import outbox
from shared.adapters.db.webhooks.events import new_event_id
from shared.domain.kinds import DEDUCTION_KIND
from shared.domain.money import ZERO
from shared.domain.remittances.deductions import Deduction, balance
from shared.domain.remittances.deductions import deductions as deductions_of
from shared.domain.remittances.matching import Claim, Decision, decide
from shared.domain.remittances.model import Line, Remittance
from shared.domain.remittances.profile import Profile

# The match lock's high half: never a lineage's, a partition's or the booking lock's.
_MATCH_LOCK = 0x5E7720


class DuplicateTrace(Exception):
    """The same key, payer and trace with other content: 409 ``remittance_duplicate_trace``."""

    code = "remittance_duplicate_trace"

    def __init__(self, remittance_id: str) -> None:
        super().__init__(remittance_id)
        self.remittance_id = remittance_id


@dataclass(frozen=True)
class Incoming:
    """A remittance as received, with what it is known by."""

    key_id: str
    payer: str
    remittance: Remittance
    profile: Profile
    source_format: str  # x12 or json
    acknowledgement: str | None = None


@dataclass
class Recorded:
    remittance_id: str
    created: bool  # False: the same remittance again (a replay, or the race's loser)
    deductions: int = 0
    matched: Decimal = ZERO
    written_off: Decimal = ZERO
    disputed: Decimal = ZERO
    ledger_rows: list[Any] = field(default_factory=list)  # LedgerRow, for the feed's wake-up


def _as_received(conn: Connection, remittance_id: str) -> Recorded:
    """A replay's answer: the remittance as matching left it on receipt (the
    same figures the first answer gave; decisions since are the reads')."""
    again = Recorded(remittance_id, created=False)
    for row in conn.execute(
        select(dd.c.matched, dd.c.written_off, dd.c.disputed).where(
            dd.c.remittance_id == remittance_id
        )
    ):
        again.deductions += 1
        again.matched += row.matched
        again.written_off += row.written_off
        again.disputed += row.disputed
    return again


def body_sha256(remittance: Remittance, partition_key: str) -> str:
    """What a replay must match: the remittance as read, and where it is matched."""
    canonical = remittance.model_dump_json() + "\x00" + partition_key
    return hashlib.sha256(canonical.encode()).hexdigest()


def new_id() -> str:
    return "rm_" + secrets.token_hex(12)


def lock_partition(conn: Connection, partition_key: str) -> None:
    """The payer partition's match lock, until commit (SQLite: one writer already)."""
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"match|{partition_key}".encode()).digest()
    conn.execute(
        text("SELECT pg_advisory_xact_lock(:k)"),
        {"k": (_MATCH_LOCK << 32) | int.from_bytes(digest[:4], "big")},
    )


def match_key(deduction_id: int, step: str, document_id: str, outcome: str) -> str:
    """A remittance row's identity: one per deduction, step (``match`` when the
    remittance came in, ``decision`` when a person decided), document and outcome."""
    name = f"settleq:deduction:{deduction_id}:{step}:{document_id}:{outcome}"
    return hashlib.sha256(name.encode()).hexdigest()


def record(engine: Engine, incoming: Incoming, now: dt.datetime) -> Recorded:
    """Record ``incoming`` and match its deductions, or find it recorded before.
    Raises ``DuplicateTrace`` for the same trace with other content."""
    remittance, profile = incoming.remittance, incoming.profile
    sha = body_sha256(remittance, profile.partition_key)
    found = balance(remittance)
    taken = deductions_of(remittance, profile.reasons)
    with engine.begin() as conn:
        period = booking.book(conn)
        rid = new_id()
        inserted = conn.execute(
            insert_ignoring_conflicts(conn, rm)
            .values(
                id=rid,
                key_id=incoming.key_id,
                payer=incoming.payer,
                trace=remittance.trace,
                body_sha256=sha,
                partition_key=profile.partition_key,
                source_format=incoming.source_format,
                currency=remittance.currency,
                paid_total=found.stated,
                computed_total=found.computed,
                paid_at=remittance.paid_at,
                received_at=now,
                body=remittance.model_dump_json(),
                acknowledgement=incoming.acknowledgement,
                deductions=len(taken),
            )
            .returning(rm.c.id)
        ).first()
        if inserted is None:
            held_id, held_sha = conn.execute(
                select(rm.c.id, rm.c.body_sha256).where(
                    rm.c.key_id == incoming.key_id,
                    rm.c.payer == incoming.payer,
                    rm.c.trace == remittance.trace,
                )
            ).one()
            if held_sha != sha:
                raise DuplicateTrace(held_id)
            return _as_received(conn, held_id)
        lock_partition(conn, profile.partition_key)
        deducted_on = remittance.paid_at or now.date()
        result = Recorded(rid, created=True, deductions=len(taken))
        documents = OpenDocuments(conn, DEDUCTION_KIND, profile.partition_key)
        documents.named(d.reference for d in taken if d.reference and d.reason_class == "promotion")
        rows: list[dict[str, Any]] = []
        decisions: list[Decision] = []
        for seq, deduction in enumerate(taken):
            claim = Claim(
                deduction.amount, deduction.reason_class, deduction.reference, deducted_on
            )
            decision = decide(
                claim, documents.candidates(claim, profile.tolerance), profile.tolerance
            )
            documents.take(decision)
            decisions.append(decision)
            line = None if deduction.line is None else remittance.lines[deduction.line]
            rows.append(_deduction_row(rid, seq, deduction, decision, profile, deducted_on, line))
        ids = _insert_deductions(conn, rows)
        ledger: list[dict[str, Any]] = []
        for deduction_id, decision in zip(ids, decisions, strict=True):
            against = decision.claim.reference or remittance.trace
            ledger += booked_rows(
                deduction_id,
                "match",
                decision,
                documents.versions,
                rid,
                profile.partition_key,
                against=against,
            )
        booked = writer_for(conn).book_matches(conn, ledger, now, period)
        result.ledger_rows = booked.rows
        for decision in decisions:
            result.matched += decision.matched
            result.written_off += decision.written_off
            result.disputed += decision.disputed
        events = [event_row(REMITTANCE_RECEIVED, rid, profile.partition_key, now)]
        if result.matched or result.written_off:
            events.append(event_row(DEDUCTION_MATCHED, rid, profile.partition_key, now))
        if result.disputed:
            events.append(event_row(DEDUCTION_DISPUTED, rid, profile.partition_key, now))
        conn.execute(insert(outbox), events)
    return result


def _deduction_row(
    rid: str,
    seq: int,
    deduction: Deduction,
    decision: Decision,
    profile: Profile,
    deducted_on: dt.date,
    line: Line | None,
) -> dict[str, Any]:
    """A deduction's row; ``line_reference`` is its line's RMR02 (the
    deduction's own reference may be its ADX's)."""
    dispute = decision.dispute
    line_reference = None if line is None else line.reference
    return {
        "remittance_id": rid,
        "seq": seq,
        "partition_key": profile.partition_key,
        "amount": deduction.amount,
        "reason_code": deduction.reason_code,
        "reason_class": deduction.reason_class,
        "reference": deduction.reference,
        "line_reference": line_reference,
        "deducted_on": deducted_on,
        "due_on": profile.due_on(deducted_on),
        "matched": decision.matched,
        "written_off": decision.written_off,
        "disputed": decision.disputed,
        "dispute_reason": None if dispute is None else dispute.reason,
        "dispute_document_id": None if dispute is None else dispute.document_id,
    }


def _insert_deductions(conn: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
    """The rows' ids, in their order (one statement per thousand)."""
    ids: list[int] = []
    for start in range(0, len(rows), 1000):
        part = rows[start : start + 1000]
        returned = conn.execute(
            insert(dd).returning(dd.c.id, dd.c.seq, sort_by_parameter_order=True), part
        )
        ids += [r.id for r in returned]
    return ids


def booked_rows(
    deduction_id: int,
    step: str,
    decision: Decision,
    versions: dict[str, int],
    remittance_id: str,
    partition_key: str,
    *,
    against: str,
) -> list[dict[str, Any]]:
    """The ledger rows of a decision: a ``deducted`` row per match, a
    ``written_off`` row for its write-off (against ``against``, the deduction's
    reference, else the remittance's trace, when it took from no document)."""
    claimed = decision.claim.amount
    found = [
        _ledger_row(
            match_key(deduction_id, step, m.document_id, "deducted"),
            "deducted",
            m.document_id,
            versions.get(m.document_id, 0),
            m.amount,
            claimed,
            deduction_id,
            remittance_id,
            partition_key,
        )
        for m in decision.matches
    ]
    write_off = decision.write_off
    if write_off is not None:
        against = write_off.document_id or against
        found.append(
            _ledger_row(
                match_key(deduction_id, step, against, "written_off"),
                "written_off",
                against,
                versions.get(against, 0) if write_off.document_id else 0,
                write_off.amount,
                claimed,
                deduction_id,
                remittance_id,
                partition_key,
            )
        )
    return found


def _ledger_row(
    key: str,
    outcome: str,
    document_id: str,
    version: int,
    amount: Decimal,
    claimed: Decimal,
    deduction_id: int,
    remittance_id: str,
    partition_key: str,
) -> dict[str, Any]:
    return {
        "reconciliation_key": key,
        "contract_version": version,
        "kind": DEDUCTION_KIND,
        "partition_key": partition_key,
        "document_id": document_id,
        "line_ref": f"D{deduction_id}",
        "job_id": remittance_id,
        "outcome": outcome,
        "amount": amount,
        "claimed_amount": claimed,
        "delta": -amount,
        "supersedes_id": None,
        "correlation_id": remittance_id,
    }


def event_row(kind: str, subject: str, partition_key: str, now: dt.datetime) -> dict[str, Any]:
    return {
        "event_id": new_event_id(),
        "type": kind,
        "subject": subject,
        "partitions": [partition_key],
        "endpoint_id": None,
        "created_at": now,
    }
