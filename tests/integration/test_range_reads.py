"""A job's and a document's ledger rows are read through their id ranges
(docs/architecture.md#ledger-schema): the ledger keeps no index by job or by
document, so a read that filtered by them alone would read the whole ledger.
Here every statement that reads the ledger for a job's lines page, a
document's lines or a remittance's named documents is explained, with
sequential scans priced out: each finds its rows through the ranges' keys and
a range of the ledger's primary key, or through the job's disputed rows'
partial index."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from shared.adapters.db.jobs.lines import list_lines, stream_lines
from shared.adapters.db.ledger.read import history
from shared.adapters.db.remittances.open_documents import OpenDocuments
from tests.support.disputes import disputed_doc, new_vendor, settle
from tests.support.plans import explained

ALLOWED = {
    "pk_ledger_entries",  # a range of ids
    "ix_ledger_entries_job_disputes",  # a job's disputed rows
    "uq_ledger_entries_identity",  # a duplicate's partition, by its key
    "pk_ledger_job_ranges",
    "pk_ledger_document_ranges",
}


@pytest.fixture
def plans(engine: Engine) -> Iterator[list[tuple[str, str]]]:
    """(statement, plan) of every SELECT of the ledger or its ranges."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's plans")
    with explained(engine, lambda s: "ledger_" in s) as found:
        yield found


def _ledger_indexes(plan: str) -> set[str]:
    """The indexes a plan reads the ledger and its ranges by."""
    names = set()
    for step in plan.splitlines():
        if " using " in step and " on ledger_" in step:
            names.add(step.split(" using ")[1].split()[0])
    return names


def test_job_and_document_reads_use_the_ranges(
    engine: Engine, plans: list[tuple[str, str]]
) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "1.00", "2.00"]) for _ in range(3)]
    job_id = settle(engine, docs)
    settle(engine, docs)  # sent again: duplicates, listed with their partition
    document_id = docs[1]["document_id"]
    plans.clear()  # settlement's own reads are not these

    lines = list(stream_lines(engine, job_id, outcome=None))
    assert len(lines) == 9 and {line.outcome for line in lines} == {"posted", "disputed"}
    assert len(list_lines(engine, job_id, outcome="posted", after=None, limit=2)) == 2
    assert len(history.document_lines(engine, document_id, limit=20)) == 6  # 3 lines, 2 jobs
    with engine.connect() as conn:
        documents = OpenDocuments(conn, "promo_accrual", vendor)
        documents.named([document_id, "NOT-A-DOCUMENT"])
        assert list(documents.known) == [document_id]

    assert any("BETWEEN" in s for s, _ in plans), [s for s, _ in plans]
    for statement, plan in plans:
        assert "Seq Scan on ledger_" not in plan, (statement, plan)
        assert _ledger_indexes(plan) <= ALLOWED, (statement, plan)
        if "ledger_entries.id BETWEEN" in statement:
            assert "pk_ledger_entries" in plan, (statement, plan)
