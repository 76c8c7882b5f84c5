"""``bench.run --ledger-rows``: the history it writes is history the schema and
the API accept, exact, the same by either COPY format, and none of the run's."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

import psycopg
import pytest

from bench import ledger_fill
from shared.adapters.db.engine import make_engine
from shared.adapters.db.jobs.queries import job_status
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
