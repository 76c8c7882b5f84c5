"""The payer partition's accrual documents and their open amounts, as one
remittance's transaction sees and changes them
(docs/architecture.md#remittances-and-deductions).

A document's open amount is the sum of ``delta`` over all its rows. The
documents a reference names are read by id (``ix_ledger_entries_document``).
Matching by amount needs every document's open amount; on PostgreSQL they are
summed once per transaction, only when a deduction needs it, into a temporary
table indexed by amount, which each match then keeps current, so a partition
of a million documents is read once, not once per deduction. Elsewhere
(SQLite: one writer, small ledgers) the partition's documents are read into
memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, func, select, text

from shared.adapters.db.tables import ledger_entries as le
from shared.adapters.db.types import utc
from shared.domain.money import ZERO
from shared.domain.remittances.matching import (
    Claim,
    Decision,
    OpenDocument,
    Tolerance,
    amount_window,
    apply,
)

_TABLE = "settleq_open_documents"
_PAGE = 64  # documents of one amount window read at a time, oldest first


class OpenDocuments:
    def __init__(self, conn: Connection, kind: str, partition_key: str) -> None:
        self.conn, self.kind, self.partition_key = conn, kind, partition_key
        self.known: dict[str, OpenDocument] = {}
        self.versions: dict[str, int] = {}  # each known document's newest contract version
        self._absent: set[str] = set()  # ids that name no document of the partition
        self._summed = False  # every document's open amount is at hand (table or memory)
        self._server = conn.dialect.name == "postgresql"

    def _of_partition(self) -> list[Any]:
        return [le.c.kind == self.kind, le.c.partition_key == self.partition_key]

    def named(self, ids: Iterable[str]) -> None:
        """Read the documents ``ids`` name that are not known yet (one query)."""
        wanted = sorted({i for i in ids if i not in self.known and i not in self._absent})
        if not wanted or (self._summed and not self._server):
            self._absent.update(i for i in wanted if i not in self.known)
            return
        if self._server:
            rows = self.conn.execute(
                select(
                    le.c.document_id,
                    func.sum(le.c.delta),
                    func.min(le.c.created_at),
                    func.max(le.c.contract_version),
                )
                .where(*self._of_partition(), le.c.document_id.in_(wanted))
                .group_by(le.c.document_id)
            )
            self._keep(rows)
        else:
            self._sum_in_memory(le.c.document_id.in_(wanted))
        self._absent.update(i for i in wanted if i not in self.known)

    def _keep(self, rows: Iterable[Any]) -> None:
        for document_id, total, first, version in rows:
            if document_id not in self.known:
                self.known[document_id] = OpenDocument(document_id, Decimal(total), utc(first))
                self.versions[document_id] = int(version)

    def _sum_in_memory(self, where: Any = None) -> None:
        """SQLite: the rows summed here, exactly (its own sum would be a float's)."""
        query = select(le.c.document_id, le.c.delta, le.c.created_at, le.c.contract_version).where(
            *self._of_partition()
        )
        if where is not None:
            query = query.where(where)
        found: dict[str, list[Any]] = {}
        for document_id, delta, created_at, version in self.conn.execute(query):
            sums = found.setdefault(document_id, [ZERO, created_at, version])
            sums[0] += delta
            sums[1] = min(sums[1], created_at)
            sums[2] = max(sums[2], version)
        self._keep((d, s[0], s[1], s[2]) for d, s in found.items())

    def candidates(self, claim: Claim, tolerance: Tolerance) -> list[OpenDocument]:
        """What ``decide`` must see for ``claim`` to decide as on every document:
        the one its reference names, and those whose open amount is in its window."""
        chosen: dict[str, OpenDocument] = {}
        if claim.reference is not None:
            self.named([claim.reference])
            if claim.reference in self.known:
                chosen[claim.reference] = self.known[claim.reference]
                return list(chosen.values())
        low, high = amount_window(claim.amount, tolerance)
        for document in self._window(max(low, ZERO), high):
            chosen.setdefault(document.document_id, document)
        return list(chosen.values())

    def _window(self, low: Decimal, high: Decimal | None) -> list[OpenDocument]:
        self._sum_all()
        if not self._server:
            return sorted(
                (
                    d
                    for d in self.known.values()
                    if d.open_amount > ZERO
                    and d.open_amount >= low
                    and (high is None or d.open_amount <= high)
                ),
                key=lambda d: (d.settled_at, d.document_id),
            )
        bounds = "open_amount > 0 AND open_amount >= :low"
        if high is not None:
            bounds += " AND open_amount <= :high"
        rows = self.conn.execute(
            text(
                f"SELECT document_id FROM {_TABLE} WHERE {bounds}"
                " ORDER BY settled_at, document_id LIMIT :n"
            ),
            {"low": low, "high": high, "n": _PAGE},
        ).scalars()
        ids = list(rows)
        self.named(ids)
        return [self.known[i] for i in ids if i in self.known]

    def _sum_all(self) -> None:
        if self._summed:
            return
        self._summed = True
        if not self._server:
            self._sum_in_memory()
            return
        self.conn.execute(
            text(
                f"CREATE TEMPORARY TABLE {_TABLE} ON COMMIT DROP AS"
                " SELECT document_id, sum(delta) AS open_amount, min(created_at) AS settled_at"
                " FROM ledger_entries WHERE kind = :kind AND partition_key = :partition"
                " GROUP BY document_id"
            ),
            {"kind": self.kind, "partition": self.partition_key},
        )
        self.conn.execute(text(f"CREATE INDEX ON {_TABLE} (open_amount) WHERE open_amount > 0"))
        self.conn.execute(text(f"ANALYZE {_TABLE}"))
        # What this transaction already took is not in the ledger yet.
        for document in self.known.values():
            self._store(document)

    def _store(self, document: OpenDocument) -> None:
        if self._server and self._summed:
            self.conn.execute(
                text(f"UPDATE {_TABLE} SET open_amount = :open WHERE document_id = :id"),
                {"open": document.open_amount, "id": document.document_id},
            )

    def take(self, decision: Decision) -> None:
        """Carry ``decision`` into the open amounts the next deduction sees
        (``StaleDecision`` if it was not made on them)."""
        touched = [m.document_id for m in decision.matches]
        if decision.write_off is not None and decision.write_off.document_id is not None:
            touched.append(decision.write_off.document_id)
        if not touched:
            return
        before = [self.known[i] for i in dict.fromkeys(touched)]
        for document in apply(before, decision):
            self.known[document.document_id] = document
            self._store(document)

    def settle(self, document_id: str, amount: Decimal) -> None:
        """A person's decision took ``amount`` from a known document."""
        document = self.known[document_id]
        self.known[document_id] = replace(document, open_amount=document.open_amount - amount)
        self._store(self.known[document_id])
