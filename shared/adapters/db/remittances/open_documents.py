"""The payer partition's accrual documents and their open amounts, as one
remittance's transaction sees and changes them
(docs/architecture.md#remittances-and-deductions).

A document's open amount is the sum of ``delta`` over all its rows. The
documents a reference names are read by id (in their id ranges, ledger/ranges.py).
Matching by amount needs every document's open amount; on PostgreSQL they are
summed once per transaction, only when a deduction needs it, into a temporary
table indexed by amount, which each match then keeps current, so a partition
of a million documents is read once, not once per deduction; what this
transaction took is kept beside it, in memory, never written back. Elsewhere
(SQLite: one writer, small ledgers) the partition's documents are read into
memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, func, select, text

from shared.adapters.db.ledger.read import ranges
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
_PAGE = 16  # documents of one amount window read at a time, oldest first


class OpenDocuments:
    def __init__(self, conn: Connection, kind: str, partition_key: str) -> None:
        self.conn, self.kind, self.partition_key = conn, kind, partition_key
        self.known: dict[str, OpenDocument] = {}
        self.versions: dict[str, int] = {}  # each known document's newest contract version
        self._absent: set[str] = set()  # ids that name no document of the partition
        self._summed = False  # every document's open amount is at hand (table or memory)
        # Documents this transaction took from: the table holds them as they were.
        self._touched: dict[str, OpenDocument] = {}
        self._server = conn.dialect.name == "postgresql"

    def _of_partition(self) -> list[Any]:
        return [le.c.kind == self.kind, le.c.partition_key == self.partition_key]

    def named(self, ids: Iterable[str]) -> None:
        """Read the documents ``ids`` name that are not known yet (one query)."""
        wanted = sorted({i for i in ids if i not in self.known and i not in self._absent})
        if not wanted or (self._summed and not self._server):
            self._absent.update(i for i in wanted if i not in self.known)
            return
        where = (
            ranges.within(le.c.id, ranges.of_documents(self.conn, wanted, self.partition_key)),
            le.c.document_id.in_(wanted),
        )
        if self._server:
            rows = self.conn.execute(
                select(
                    le.c.document_id,
                    func.sum(le.c.delta),
                    func.min(le.c.created_at),
                    func.max(le.c.contract_version),
                )
                .where(*self._of_partition(), *where)
                .group_by(le.c.document_id)
            )
            self._keep(rows)
        else:
            self._sum_in_memory(*where)
        self._absent.update(i for i in wanted if i not in self.known)

    def _keep(self, rows: Iterable[Any]) -> None:
        for document_id, total, first, version in rows:
            if document_id not in self.known:
                self.known[document_id] = OpenDocument(document_id, Decimal(total), utc(first))
                self.versions[document_id] = int(version)

    def _sum_in_memory(self, *where: Any) -> None:
        """SQLite: the rows summed here, exactly (its own sum would be a float's)."""
        query = select(le.c.document_id, le.c.delta, le.c.created_at, le.c.contract_version).where(
            *self._of_partition(), *where
        )
        found: dict[str, list[Any]] = {}
        for document_id, delta, created_at, version in self.conn.execute(query):
            sums = found.setdefault(document_id, [ZERO, created_at, version])
            sums[0] += delta
            sums[1] = min(sums[1], created_at)
            sums[2] = max(sums[2], version)
        self._keep((d, s[0], s[1], s[2]) for d, s in found.items())

    def candidates(self, claim: Claim, tolerance: Tolerance) -> list[OpenDocument]:
        """What ``decide`` must see for ``claim`` to decide as on every document:
        the one its reference names, else the oldest whose open amount is within
        tolerance of it (with any older ones in its window)."""
        if claim.reference is not None:
            self.named([claim.reference])
            if claim.reference in self.known:
                return [self.known[claim.reference]]
        low, high = amount_window(claim.amount, tolerance)
        low = max(low, ZERO)
        if not self._server:
            self._sum_all()
            return [d for d in self.known.values() if _inside(d, low, high)]
        found = self._window(claim, tolerance, low, high)
        # What this transaction took is not in the table: its documents as they are now.
        found += [d for d in self._touched.values() if _inside(d, low, high)]
        return list({d.document_id: d for d in found}.values())

    def _window(
        self, claim: Claim, tolerance: Tolerance, low: Decimal, high: Decimal | None
    ) -> list[OpenDocument]:
        """The table's documents in the window, oldest first, page by page until
        one is within tolerance (none older can be then: the oldest wins)."""
        self._sum_all()
        bounds = "open_amount > 0 AND open_amount >= :low"
        if high is not None:
            bounds += " AND open_amount <= :high"
        found: list[OpenDocument] = []
        offset = 0
        while True:
            rows = self.conn.execute(
                text(
                    "SELECT document_id, open_amount, settled_at, version"
                    f" FROM {_TABLE} WHERE {bounds}"
                    " ORDER BY settled_at, document_id LIMIT :n OFFSET :offset"
                ),
                {"low": low, "high": high, "n": _PAGE, "offset": offset},
            ).all()
            for document_id, total, first, version in rows:
                if document_id in self._touched:
                    continue  # as it is now: added by the caller
                document = OpenDocument(document_id, Decimal(total), utc(first))
                self.known.setdefault(document_id, document)
                self.versions.setdefault(document_id, int(version))
                found.append(self.known[document_id])
            near = any(
                (claim.amount - d.open_amount).copy_abs() <= tolerance.limit(d.open_amount)
                for d in found
            )
            if near or len(rows) < _PAGE:
                return found
            offset += _PAGE

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
                " SELECT document_id, sum(delta) AS open_amount,"
                " min(created_at) AS settled_at, max(contract_version) AS version"
                " FROM ledger_entries WHERE kind = :kind AND partition_key = :partition"
                " GROUP BY document_id"
            ),
            {"kind": self.kind, "partition": self.partition_key},
        )
        self.conn.execute(
            text(f"CREATE INDEX ON {_TABLE} (open_amount, settled_at) WHERE open_amount > 0")
        )
        self.conn.execute(text(f"ANALYZE {_TABLE}"))

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
            self._touched[document.document_id] = document


def _inside(document: OpenDocument, low: Decimal, high: Decimal | None) -> bool:
    amount = document.open_amount
    return amount > ZERO and amount >= low and (high is None or amount <= high)
