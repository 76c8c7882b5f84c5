"""settleq benchmark of the CSV exports, on PostgreSQL (issue 29, item 15).

Settles one promo_accrual job (default 420,000 lines over 50 vendors, one
line in five disputed) through the real settlement code in this process,
starts a real ``settleq api`` on that database and measures over HTTP, in
one sitting:

- the job's lines as CSV (``GET /v1/jobs/{id}/lines.csv``), every row;
- the same lines read as the export read them before issue 29: every JSON
  page of ``GET /v1/jobs/{id}/lines?limit=1000`` (the old export made each
  of its chunks from one such page: four outcome ranges of up to 1,000 rows
  read for 1,000 kept);
- the job's disputes as CSV (``GET /v1/disputes?job_id=`` with ``Accept:
  text/csv``), the export the job's lines are to match per row.

Each is timed from the request to the last byte, with the API's and
PostgreSQL's CPU; the figures that travel between machines are the µs per
row and the ratios between the three. The job-lines CSV is checked against
the ledger: its row count, its posted amounts' sum, and every row carrying
its job, kind, partition and sku. Its own database, dropped at the end.

    python -m bench.exports                  # 420,000 lines
    python -m bench.exports --lines 42000    # quick mode
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from bench.disputes import cpu_s
from bench.run import service_cpu
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import make_context
from shared.adapters.db import tables
from shared.domain.synthetic import promo_batch
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import VIEWER_TOKEN, ServiceEnv, isolated_env
from tests.support.stack import Stack

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}


def settle(env: ServiceEnv, lines: int, vendors: int) -> tuple[str, float, dict[str, Any]]:
    """Settle the job in process; (job id, seconds, what the ledger holds of it)."""
    settings = env.settings(max_chunk_documents=500)
    broker = build_broker(settings)
    ctx = make_context(settings, broker)
    try:
        documents = promo_batch(lines, vendors=vendors, disputed_every=5)["documents"]
        publish_promo_contracts(ctx.engine, sorted({d["partition_key"] for d in documents}))
        started = time.monotonic()
        job_id, messages = store_job(ctx.engine, settings, ctx.internal_key, documents)
        for message in messages:
            stages.settle_chunk(ctx, message, 1)
        seconds = time.monotonic() - started
        e = tables.ledger_entries
        with ctx.engine.connect() as conn:
            rows = conn.execute(
                select(e.c.outcome, func.count(), func.sum(e.c.amount))
                .where(e.c.job_id == job_id)
                .group_by(e.c.outcome)
            ).all()
        ledger = {outcome: (int(count), Decimal(total)) for outcome, count, total in rows}
        return job_id, seconds, ledger
    finally:
        ctx.engine.dispose()
        broker.close()


def timed(api: int, read: Any) -> tuple[float, float, float, Any]:
    """(seconds, API CPU s, PostgreSQL CPU s, what ``read`` answered)."""
    cpu0, pg0 = cpu_s(api), service_cpu()["postgres"]
    started = time.monotonic()
    answer = read()
    seconds = time.monotonic() - started
    return seconds, cpu_s(api) - cpu0, service_cpu()["postgres"] - pg0, answer


def read_csv(url: str, path: str) -> list[dict[str, str]]:
    headers = {**VIEWER, "Accept": "text/csv"}
    with httpx.stream("GET", f"{url}{path}", headers=headers, timeout=900) as response:
        assert response.status_code == 200, response.read()
        return list(csv.DictReader(response.iter_lines()))


def read_pages(url: str, job_id: str) -> int:
    rows, cursor = 0, None
    with httpx.Client(base_url=url, headers=VIEWER, timeout=900) as client:
        while True:
            params: dict[str, Any] = {"limit": 1000} | ({"cursor": cursor} if cursor else {})
            page = client.get(f"/v1/jobs/{job_id}/lines", params=params).json()
            rows += len(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=420_000)
    parser.add_argument("--vendors", type=int, default=50)
    args = parser.parse_args()

    with isolated_env("bexp") as env:
        job_id, settle_s, ledger = settle(env, args.lines, args.vendors)
        print(f"settled {args.lines:,} lines in {settle_s:.1f} s: {ledger}")
        logs = Path("bench/logs")
        logs.mkdir(parents=True, exist_ok=True)
        stack = Stack(env, logs)
        try:
            stack.start_api()
            api = stack.processes["api"].pid
            figures = {
                "job lines CSV": timed(
                    api, lambda: read_csv(stack.url, f"/v1/jobs/{job_id}/lines.csv")
                ),
                "job lines, JSON pages of 1,000 (the old export's reads)": timed(
                    api, lambda: read_pages(stack.url, job_id)
                ),
                "disputes CSV of the job": timed(
                    api, lambda: read_csv(stack.url, f"/v1/disputes?job_id={job_id}")
                ),
            }
        finally:
            stack.stop()

    lines = figures["job lines CSV"][3]
    posted = [r for r in lines if r["outcome"] == "posted"]
    checks = {
        f"CSV rows = the job's lines ({args.lines:,})": len(lines) == args.lines,
        "posted rows and amounts = the ledger's": (
            len(posted),
            sum((Decimal(r["amount"]) for r in posted), Decimal(0)),
        )
        == ledger["posted"],
        "every row names its job, kind, partition and sku": all(
            r["job_id"] == job_id
            and r["kind"] == "promo_accrual"
            and r["partition_key"].startswith("VENDOR-")
            and r["sku"].startswith("SKU-")
            for r in lines
        ),
        "the JSON pages read every line": figures[
            "job lines, JSON pages of 1,000 (the old export's reads)"
        ][3]
        == args.lines,
    }
    for name, passed in checks.items():
        print(f"  {'ok ' if passed else 'BAD'} {name}")
    print()
    print("| read | rows | seconds | µs per row | API CPU µs/row | PostgreSQL CPU µs/row |")
    print("|---|---:|---:|---:|---:|---:|")
    per_row: dict[str, float] = {}
    for name, (seconds, api_cpu, pg_cpu, answer) in figures.items():
        rows = answer if isinstance(answer, int) else len(answer)
        per_row[name] = seconds * 1e6 / max(1, rows)
        print(
            f"| {name} | {rows:,} | {seconds:.2f} | {per_row[name]:.1f} "
            f"| {api_cpu * 1e6 / max(1, rows):.1f} | {pg_cpu * 1e6 / max(1, rows):.1f} |"
        )
    lines_csv, pages, disputes = per_row.values()
    print(
        f"\nratios (per row): job-lines CSV / disputes CSV {lines_csv / disputes:.2f}; "
        f"old reads / job-lines CSV {pages / lines_csv:.2f}"
    )
    ok = all(checks.values())
    print(f"verification {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
