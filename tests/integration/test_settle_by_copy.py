"""The PostgreSQL ledger writer's fast case, ``COPY`` (shared/adapters/db/ledger/postgres.py):
it writes what its rounds (staged inserts) and the portable writer write, it
copies no line its probes find in the ledger, and a line there that they miss
sends the chunk, with nothing written, to the rounds."""

from __future__ import annotations

import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

from shared.adapters.db import tables
from shared.adapters.db.ledger import postgres, writer
from shared.config.settings import Settings
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.settlement import plan_chunk
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.ledger import commit_plan

KIND = get_kind("promo_accrual")
CONTRACT = PromoContract.model_validate({"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"})


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables the COPY path streamed rows into, and "statement" where a
    round's staged insert ran, in order."""
    seen: list[str] = []
    real_copy, real_statement = postgres.copy_text, postgres.insert_staged

    def copy_spy(conn: Any, table: str, columns: Any, text: str) -> None:
        seen.append(table)
        real_copy(conn, table, columns, text)

    def statement_spy(*args: Any, **kwargs: Any) -> Any:
        seen.append("statement")
        return real_statement(*args, **kwargs)

    monkeypatch.setattr(postgres, "copy_text", copy_spy)
    monkeypatch.setattr(postgres, "insert_staged", statement_spy)
    return seen


# The PostgreSQL writer with its COPY path off: every unit takes the rounds.
BY_STATEMENT = writer.PostgresWriter(by_copy=False)


def _settle(
    engine: Engine, docs: list[dict[str, Any]], by: writer.LedgerWriter | None = None
) -> tuple[ChunkRef, ChunkOutcome]:
    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    ref = ChunkRef(message["chunk_id"], job_id, "promo_accrual", sum(len(d.lines) for d in parsed))
    contracts = {(d.partition_key, 1): CONTRACT for d in parsed}
    with engine.begin() as conn:
        outcome = commit_plan(conn, ref, plan_chunk(KIND, parsed, contracts, 0), 1, by)
    assert outcome is not None
    return ref, outcome


def _written(engine: Engine, job_id: str) -> dict[str, Any]:
    """What a chunk wrote, without what names its vendor or the time."""
    ledger, outcomes, outbox = tables.ledger_entries, tables.line_outcomes, tables.outbox
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger).where(ledger.c.job_id == job_id).order_by(ledger.c.position)
        ).all()
        noted = conn.execute(
            select(outcomes).where(outcomes.c.job_id == job_id).order_by(outcomes.c.id)
        ).all()
        units = conn.execute(select(outbox.c.ledger_entry_ids)).scalars().all()
    ids = {r.id for r in rows}
    listing = [u for u in units if u and set(u) & ids]
    keep = ("contract_version", "kind", "line_ref", "outcome", "amount", "claimed_amount")
    return {
        "ledger": [
            (*(getattr(r, c) for c in keep), r.delta, r.supersedes_id, r.position) for r in rows
        ],
        "outcomes": [
            (r.line_ref, r.outcome, r.reason, r.amount, r.claimed_amount, r.delta, r.position)
            for r in noted
        ],
        # One outbox row lists every new row of the chunk, ascending.
        "outbox": [sorted(u) == u and set(u) == ids for u in listing],
    }


def _documents(vendor: str) -> list[dict[str, Any]]:
    posted = promo_doc(
        vendor, [promo_line(1, "3", "0.38"), promo_line(2, "8", "1.00")], document_id="INV-A"
    )
    disputed = promo_doc(vendor, [promo_line(1, "8", "9.00")], document_id="INV-B")
    return [posted, disputed, dict(posted)]  # the last repeats the first: duplicates


def test_the_copy_path_writes_what_the_statement_writes(engine: Engine, copies: list[str]) -> None:
    by_copy, by_copy_outcome = _settle(engine, _documents(uid("V-")))
    assert copies == ["ledger_entries"]
    by_statement, by_statement_outcome = _settle(engine, _documents(uid("V-")), BY_STATEMENT)
    assert copies == ["ledger_entries", "statement"]
    # The portable writer, on the same server, writes the same too.
    portable, portable_outcome = _settle(engine, _documents(uid("V-")), writer.LedgerWriter())
    assert copies == ["ledger_entries", "statement"]
    assert by_copy_outcome == by_statement_outcome == portable_outcome
    assert (by_copy_outcome.posted, by_copy_outcome.disputed, by_copy_outcome.duplicate) == (
        2,
        1,
        2,
    )
    assert by_copy_outcome.amount_posted == Decimal("1.38")
    written = _written(engine, by_copy.job_id)
    assert written == _written(engine, by_statement.job_id) == _written(engine, portable.job_id)
    assert len(written["ledger"]) == 3 and written["outbox"] == [True]
    assert [o[1] for o in written["outcomes"]].count("duplicate") == 2


@pytest.mark.parametrize("path", ["copy", "statement"])
def test_every_row_of_a_unit_carries_its_transactions_time(
    engine: Engine, copies: list[str], path: str
) -> None:
    """A COPY'd row leaves created_at to the column's default, now(): it must be
    the one time its unit's marker and outbox rows carry, the server's."""
    with engine.connect() as conn:
        before = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    ref, _ = _settle(engine, _documents(uid("V-")), None if path == "copy" else BY_STATEMENT)
    assert copies == (["ledger_entries"] if path == "copy" else ["statement"])
    ledger, results = tables.ledger_entries, tables.chunk_results
    with engine.connect() as conn:
        stamps = set(conn.execute(select(ledger.c.created_at).where(ledger.c.job_id == ref.job_id)))
        stamps |= set(
            conn.execute(select(results.c.created_at).where(results.c.job_id == ref.job_id))
        )
        ids = conn.execute(select(ledger.c.id).where(ledger.c.job_id == ref.job_id)).scalars()
        wanted = sorted(ids)
        listed = [
            (u.created_at,)
            for u in conn.execute(
                select(tables.outbox.c.created_at, tables.outbox.c.ledger_entry_ids)
            )
            if u.ledger_entry_ids == wanted
        ]
        after = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
    assert len(wanted) == 3 and len(listed) == 1  # the unit's rows, its outbox row
    stamps |= set(listed)
    assert len(stamps) == 1
    [(stamp,)] = stamps
    assert before <= stamp <= after


def test_a_resent_document_is_found_before_anything_is_copied(
    engine: Engine, copies: list[str]
) -> None:
    docs = _documents(uid("V-"))
    _settle(engine, docs)
    copies.clear()
    ref, outcome = _settle(engine, docs)
    assert copies == []  # every line is found in the ledger: nothing to copy
    assert (outcome.posted, outcome.disputed, outcome.duplicate) == (0, 0, 5)
    assert _written(engine, ref.job_id)["ledger"] == []


def test_a_line_already_posted_that_the_probe_misses_sends_the_chunk_to_the_statement(
    engine: Engine, copies: list[str]
) -> None:
    vendor = uid("V-")
    _settle(engine, [promo_doc(vendor, [promo_line(2, "8", "1.00")], document_id="INV-C")])
    # The same document again with a new first line: the probe asks only for that
    # one, so the COPY runs and meets line 2 in the identity's unique index.
    again = promo_doc(
        vendor, [promo_line(3, "4", "0.50"), promo_line(2, "8", "1.00")], document_id="INV-C"
    )
    copies.clear()
    ref, outcome = _settle(engine, [again])
    assert copies == ["ledger_entries", "statement"]
    assert (outcome.posted, outcome.duplicate) == (1, 1)
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        rows = (
            conn.execute(
                select(ledger.c.line_ref)
                .where(ledger.c.partition_key == vendor)
                .order_by(ledger.c.id)
            )
            .scalars()
            .all()
        )
    assert rows == ["2", "3"]  # the COPY's rows were rolled back with its savepoint
    written = _written(engine, ref.job_id)
    assert [r[2] for r in written["ledger"]] == ["3"] and written["outbox"] == [True]
    assert [o[1] for o in written["outcomes"]] == ["duplicate"]


def test_a_resent_document_among_new_ones_is_duplicates_and_the_rest_is_copied(
    engine: Engine, copies: list[str]
) -> None:
    vendor = uid("V-")
    resent = promo_doc(vendor, [promo_line(1, "4", "0.50"), promo_line(2, "8", "1.00")])
    _settle(engine, [resent])
    fresh = [promo_doc(vendor, [promo_line(1, "8", "1.00")]) for _ in range(2)]
    copies.clear()
    ref, outcome = _settle(engine, [fresh[0], resent, fresh[1]])
    assert copies == ["ledger_entries"]
    assert (outcome.posted, outcome.duplicate) == (2, 2)
    written = _written(engine, ref.job_id)
    assert [r[-1] for r in written["ledger"]] == [0, 3]  # batch positions of the new lines
    assert written["outbox"] == [True]
    assert [(o[1], o[-1]) for o in written["outcomes"]] == [("duplicate", 1), ("duplicate", 2)]
    # What the statement writes for the same chunk of another vendor.
    other = uid("V-")
    _settle(engine, [{**resent, "partition_key": other}], BY_STATEMENT)
    fresh = [{**d, "partition_key": other} for d in fresh]
    by_statement, _ = _settle(
        engine, [fresh[0], {**resent, "partition_key": other}, fresh[1]], BY_STATEMENT
    )
    assert _written(engine, by_statement.job_id) == written


@pytest.mark.parametrize("first_commits", [True, False])
def test_a_copy_racing_another_chunks_uncommitted_rows_posts_each_line_once(
    engine: Engine, copies: list[str], first_commits: bool
) -> None:
    # Two jobs carry one document (a resend, with Redis's leases lost, so both
    # settle at once). The second's probes cannot see the first's uncommitted
    # rows: its COPY waits on them in the identity's index, then meets them
    # (the first commits: duplicates, by the statement) or takes them (it rolls back).
    vendor = uid("V-")
    doc = promo_doc(vendor, [promo_line(1, "4", "0.50"), promo_line(2, "8", "1.00")])
    first, [first_message] = store_job(engine, Settings(), b"k", [doc])
    parsed = [PromoDocument.model_validate(doc)]
    plan = plan_chunk(KIND, parsed, {(vendor, 1): CONTRACT}, 0)
    conn = engine.connect()
    transaction = conn.begin()
    try:
        commit_plan(conn, ChunkRef(first_message["chunk_id"], first, "promo_accrual", 2), plan, 1)
        result: dict[str, Any] = {}
        racer = threading.Thread(target=lambda: result.update(settled=_settle(engine, [doc])))
        racer.start()
        with engine.connect() as watch:  # until the racer waits on the first's rows
            deadline = time.monotonic() + 10
            while not watch.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                )
            ).scalar_one():
                watch.rollback()
                assert time.monotonic() < deadline and racer.is_alive()
                time.sleep(0.02)
        (transaction.commit if first_commits else transaction.rollback)()
    finally:
        conn.close()
    racer.join(10)
    _, outcome = result["settled"]
    if first_commits:
        assert (outcome.posted, outcome.duplicate) == (0, 2)
        assert copies == ["ledger_entries", "ledger_entries", "statement"]
    else:
        assert (outcome.posted, outcome.duplicate) == (2, 0)
        assert copies == ["ledger_entries", "ledger_entries"]
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        keys = (
            conn.execute(
                select(ledger.c.reconciliation_key).where(ledger.c.partition_key == vendor)
            )
            .scalars()
            .all()
        )
    assert len(keys) == len(set(keys)) == 2
