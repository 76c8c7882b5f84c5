"""A line's story and a document's lines on a large ledger
(docs/api.md#ledger-history-and-search): the ledger filled with ``--ledger-rows``
rows of history (``bench/ledger_fill.py``, default 20,000,000) on the bench's
tuned PostgreSQL, then ``--lookups`` of each, each for a row drawn at random:

- the identity (``GET /v1/identities/{key}``'s read: ``history.identity``);
- the document's lines by id and partition, and by id alone (``GET /v1/lines``'s
  read: ``history.document_lines``), through its id ranges;
- a page of 1,000 of the row's job's lines from the row's position, all of them
  and its disputed ones only (``GET /v1/jobs/{id}/lines``'s read:
  ``jobs.lines.list_lines``), through the job's ranges and its disputed index;
- a page of 1,000 of the ledger feed from a cursor drawn at random, and a
  partition's page (``GET /v1/ledger/feed``'s read, ``bench/feed.py::pages``,
  the filled rows given units of 5,000 as settlement writes them).

Prints each one's median, p95 and slowest time in ms (the first lookups read
pages from disk, the rest mostly from memory) and the plan PostgreSQL chose
(the index it reads). The API adds its own hop and JSON to these reads.

    python -m bench.lookup [--ledger-rows 20000000] [--lookups 200]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text

from bench.feed import pages, units
from bench.ledger_fill import fill
from bench.server import describe, server
from shared.adapters.db.engine import make_engine
from shared.adapters.db.jobs.lines import list_lines
from shared.adapters.db.ledger.read import history
from tests.support.infra import isolated_env

# "In milliseconds": the 95th percentile of each kind (the slowest are the first
# lookups, which read the index's and the table's pages from disk).
TARGET_MS = 10.0
PAGE_TARGET_MS = 50.0  # a page of 1,000 lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledger-rows", type=int, default=20_000_000)
    parser.add_argument("--lookups", type=int, default=200)
    args = parser.parse_args()
    with server("tuned") as admin:
        print(describe("tuned", admin))
        with isolated_env("lookup", admin) as env:
            started = time.monotonic()
            filled = fill(env.database_url, args.ledger_rows)
            print(filled.report())
            print(f"filled in {time.monotonic() - started:.0f} s")
            units(env.database_url)
            engine = make_engine(env.database_url)
            try:
                found = measure(engine, args.lookups)
                return found if pages(engine, args.lookups) else 1
            finally:
                engine.dispose()


def measure(engine: Engine, lookups: int) -> int:
    columns = (
        "SELECT reconciliation_key, document_id, partition_key, job_id, position"
        " FROM ledger_entries"
    )
    with engine.connect() as conn:
        # A sample of the table's pages (a full sort of 20M rows would take minutes);
        # a small ledger's sample may hold none: then its rows, shuffled.
        rows = (
            conn.execute(
                text(f"{columns} TABLESAMPLE SYSTEM (0.1) ORDER BY random() LIMIT :n"),
                {"n": lookups},
            ).all()
            or conn.execute(text(f"{columns} ORDER BY random() LIMIT :n"), {"n": lookups}).all()
        )
    if not rows:
        print("the ledger is empty: nothing to look up")
        return 1
    print(f"{len(rows)} rows drawn at random")
    cases: dict[str, Callable[[Any], int]] = {
        "identity": lambda r: len(history.identity(engine, r.reconciliation_key)),
        "document + partition": lambda r: len(
            history.document_lines(engine, r.document_id, partition_key=r.partition_key, limit=100)
        ),
        "document alone": lambda r: len(history.document_lines(engine, r.document_id, limit=100)),
        "job's lines page": lambda r: len(
            list_lines(engine, r.job_id, outcome=None, after=(r.position, "ledger", 0), limit=1000)
        ),
        "job's disputed page": lambda r: len(
            list_lines(
                engine, r.job_id, outcome="disputed", after=(r.position, "ledger", 0), limit=1000
            )
        ),
    }
    ok = True
    for name, lookup in cases.items():
        target = PAGE_TARGET_MS if name.startswith("job") else TARGET_MS
        times, found = [], 0
        for row in rows:
            started = time.perf_counter()
            found += lookup(row)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        p95 = times[int(len(times) * 0.95) - 1]
        slowest = times[-1]
        ok &= p95 <= target
        print(
            f"{name:22} median {statistics.median(times):6.2f} ms, p95 {p95:6.2f} ms,"
            f" slowest {slowest:6.2f} ms ({found / len(rows):.1f} rows a lookup;"
            f" target: p95 <= {target:g} ms: {'ok' if p95 <= target else 'MISSED'})"
        )
    explain(engine, rows[0])
    return 0 if ok else 1


def explain(engine: Engine, row: Any) -> None:
    """The plans of the reads, as PostgreSQL runs them."""
    with engine.connect() as conn:
        for label, sql, params in (
            (
                "identity",
                "SELECT id FROM ledger_entries"
                " WHERE decode(reconciliation_key, 'hex') = decode(:k, 'hex')"
                " AND outcome IN ('posted', 'disputed')",
                {"k": row.reconciliation_key},
            ),
            (
                "document's ranges",
                "SELECT first_id, last_id FROM ledger_document_ranges"
                " WHERE document_id = :d AND partition_key = :p",
                {"d": row.document_id, "p": row.partition_key},
            ),
            (
                "a range's rows",
                "SELECT id FROM ledger_entries WHERE id BETWEEN :a AND :b AND document_id = :d"
                " AND outcome IN ('posted', 'disputed')",
                {"a": 1, "b": 5000, "d": row.document_id},
            ),
        ):
            plan = conn.execute(text(f"EXPLAIN (COSTS OFF) {sql}"), params).scalars().all()
            print(f"plan ({label}): " + " / ".join(line.strip() for line in plan))


if __name__ == "__main__":
    raise SystemExit(main())
