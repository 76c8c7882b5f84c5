"""``bench.run --ledger-rows``: the history it writes is history the schema and
the API accept, exact, the same by either COPY format, and none of the run's."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

import psycopg
import pytest

from bench import ledger_fill
from shared.adapters.db.engine import make_engine
from shared.adapters.db.jobs.lines import stream_lines
from shared.adapters.db.jobs.queries import job_status
from shared.adapters.db.ledger.read.history import document_lines
from shared.adapters.db.periods import reads, sums
from shared.domain import periods as domain
from tests.support.infra import isolated_env
from tests.support.workload import RATES

ROWS = 12_500  # two jobs of 6,000 lines and a partial third, chunks of 5,000


@pytest.fixture(autouse=True)
def small_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_fill, "JOB_LINES", 6_000)


def _ledger(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT * FROM ledger_entries ORDER BY id").fetchall()


def test_filled_jobs_read_as_completed_with_counters_equal_to_their_ledger_rows() -> None:
    with isolated_env("fill") as env:
        filled = ledger_fill.fill(env.database_url, ROWS)
        assert (filled.jobs, filled.chunks) == (3, 5)
        assert filled.after["total"] > filled.before["total"]
        engine = make_engine(env.database_url)
        with psycopg.connect(env.database_url) as conn:
            jobs = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY created_at")]
            for job_id in jobs:
                status = job_status(engine, job_id)
                assert status is not None and status.state == "completed"
                sums = {
                    outcome: (count, amount, claimed)
                    for outcome, count, amount, claimed in conn.execute(
                        "SELECT outcome, count(*), sum(amount), sum(claimed_amount)"
                        " FROM ledger_entries WHERE job_id = %s GROUP BY outcome",
                        (job_id,),
                    )
                }
                assert status.outcomes["posted"] == sums["posted"][0]
                assert status.outcomes["disputed"] == sums["disputed"][0]
                assert status.amounts["posted"] == sums["posted"][1]
                assert status.amounts["disputed"] == sums["disputed"][2]
                assert sum(status.outcomes.values()) == status.lines
                # Its lines page and its documents find every row through their ranges.
                lines = stream_lines(engine, job_id, outcome=None)
                assert sum(1 for _ in lines) == status.lines
            documents = conn.execute(
                "SELECT document_id, partition_key, count(*) FROM ledger_entries"
                " GROUP BY document_id, partition_key ORDER BY document_id LIMIT 3"
            ).fetchall()
            for document_id, partition_key, count in documents:
                found = document_lines(engine, document_id, partition_key=partition_key, limit=99)
                assert len(found) == count
            keys, partitions, periods = conn.execute(
                "SELECT count(DISTINCT reconciliation_key), array_agg(DISTINCT partition_key),"
                " array_agg(DISTINCT split_part(document_id, '-CLAIM-', 1))"
                " FROM ledger_entries"
            ).fetchone()  # type: ignore[misc]
            assert keys == ROWS
            assert all(p.startswith("HIST-") for p in partitions)  # none of the run's vendors
            assert max(periods) < "2026-Q3" and len(periods) == 2  # two jobs to a quarter
            # Settlement's next row takes the id after the history's.
            assert conn.execute(
                "SELECT nextval(pg_get_serial_sequence('ledger_entries', 'id'))"
            ).fetchone() == (ROWS + 1,)
        engine.dispose()


def test_text_and_binary_copy_write_the_same_ledger() -> None:
    ledgers = []
    for fmt in ledger_fill.FORMATS:
        with isolated_env("fill") as env:
            ledger_fill.fill(env.database_url, ROWS, fmt)
            ledgers.append(_ledger(env.database_url))
    assert ledgers[0] == ledgers[1]


def test_amounts_in_cents_are_the_contract_rates_rounded_half_up() -> None:
    for tier, rate in RATES.items():
        for units in range(1, 500):
            cents = (units * ledger_fill.RATES_MILLI[tier] + 5) // 10
            exact = (units * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            assert Decimal(ledger_fill.cents_text(cents)) == exact


def test_history_ends_the_quarter_before_the_run() -> None:
    assert [ledger_fill.quarter(n)[0] for n in range(4)] == [
        "2026-Q2",
        "2026-Q1",
        "2025-Q4",
        "2025-Q3",
    ]
    assert ledger_fill.quarter(2)[1] > dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_rows_are_booked_in_the_open_period_the_migration_made_by_default() -> None:
    with isolated_env("fill") as env:
        filled = ledger_fill.fill(env.database_url, ROWS)
        with psycopg.connect(env.database_url) as conn:
            [(name, status, after_id)] = conn.execute(
                "SELECT name, status, after_id FROM periods"
            ).fetchall()
            booked = conn.execute(
                "SELECT period, count(*) FROM ledger_entries GROUP BY period"
            ).fetchall()
        assert (status, after_id) == ("open", 0)
        assert booked == [(name, ROWS)]
        assert (filled.open_period, filled.open_rows, filled.periods) == (name, ROWS, [])


@pytest.mark.parametrize("periods", [3, [5_000, 4_000]])
def test_closed_periods_are_id_ranges_summed_by_the_products_close(
    periods: int | list[int],
) -> None:
    sizes = ledger_fill.period_sizes(ROWS, periods)
    with isolated_env("fill") as env:
        filled = ledger_fill.fill(env.database_url, ROWS, periods=periods)
        engine = make_engine(env.database_url)
        accounts = domain.accounts(None)
        try:
            with psycopg.connect(env.database_url) as conn:
                listed = conn.execute(
                    "SELECT name, seq, status, after_id, last_id, rows, journal_sha256,"
                    " opened_at, closed_at FROM periods ORDER BY seq"
                ).fetchall()
                booked: dict[str, int] = dict(
                    conn.execute(
                        "SELECT period, count(*) FROM ledger_entries GROUP BY period"
                    ).fetchall()
                )
                ranges = {
                    p: (lo, hi)
                    for p, lo, hi in conn.execute(
                        "SELECT period, min(id), max(id) FROM ledger_entries GROUP BY period"
                    )
                }
            names = [ledger_fill.period_name(n) for n in range(len(sizes) + 1)]
            assert [p[0] for p in listed] == names and names[0] == "2025-01"
            assert [p[2] for p in listed] == ["closed"] * len(sizes) + ["open"]
            after = 0
            for (name, _, _, after_id, last_id, rows, sha, opened, closed), size in zip(
                listed, sizes, strict=False
            ):
                assert (after_id, last_id, rows) == (after, after + size, size)
                assert booked[name] == size and ranges[name] == (after + 1, after + size)
                # The journal the API serves is the one the close summed.
                journal = reads.journal(engine, name, accounts)
                assert journal.final and domain.sha256(journal.csv) == sha
                assert opened < closed
                after = last_id
            open_row = listed[-1]
            assert (open_row[3], open_row[4]) == (after, None)
            assert booked.get(names[-1], 0) == ROWS - sum(sizes) == filled.open_rows
            # The last closed period's closings are the whole history's sums.
            _, found = reads.balances(engine, names[-2], sums.Scope(), accounts)
            with psycopg.connect(env.database_url) as conn:
                whole: dict[str, object] = dict(
                    conn.execute(
                        "SELECT partition_key, sum(delta) FROM ledger_entries"
                        " WHERE id <= %s GROUP BY partition_key",
                        (after,),
                    ).fetchall()
                )
            assert {b.partition_key: b.closing for b in found} == whole
        finally:
            engine.dispose()
