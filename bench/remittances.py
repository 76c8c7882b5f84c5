"""settleq benchmark of a remittance's match, on PostgreSQL (issue 53).

A partition of N settled promo_accrual documents (default 1,000,000, one
posted row each, amounts 1.00 to 5,000.00, spread over a year of created_at)
is written straight into the ledger by COPY, as ``bench.ledger_fill`` writes
history. Then an 820 of L RMR lines (default 10,000), D of them (default
2,000) with a promotion ADX (reason 02): half name their document (by
reference), half take exactly some other document's open amount under an
invoice number that names none (by amount), each the only document of its
amount (so the oldest within tolerance is it). The rest pay in full.

1. **Over HTTP**: a real ``settleq api`` on that database, the payer's
   profile put, the 820 POSTed signed: the wall time from the request to its
   answer (every deduction matched), and the API process's peak RSS (VmHWM).
2. **In process**, a second 820 of the same shape (other documents): each
   deduction's match timed alone (``candidates`` + ``decide`` + ``take``, the
   part that grows with the partition), for its p50, p95 and max; the one-off
   sum of the partition's open amounts (the temporary table, on the first
   deduction matched by amount) is reported apart.

Checks: every promotion deduction matched (none disputed), the remittance
recorded once, and the ledger's deducted rows add up to what was deducted.

    python -m bench.remittances                       # 1,000,000 documents
    python -m bench.remittances --documents 100000    # quick mode
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import random
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import func, select

from bench.procstats import process_stats
from services.commands.client import Client
from shared.adapters.db.engine import make_engine
from shared.adapters.db.remittances import open_documents, store
from shared.adapters.db.remittances.tables import deductions
from shared.adapters.db.tables import ledger_entries as le
from shared.domain.kinds import DEDUCTION_KIND
from shared.domain.remittances.profile import Profile
from shared.domain.remittances.x12_820 import read_820
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    ServiceEnv,
    isolated_env,
)
from tests.support.stack import Stack

PARTITION = "PAYER-BENCH"
SENDER = "BENCHPAYER"


def fill(env: ServiceEnv, documents: int, seed: int) -> list[Decimal]:
    """N documents of one posted row each; their amounts, by number."""
    rng = random.Random(seed)
    amounts = [Decimal(rng.randint(100, 500_000)) / 100 for _ in range(documents)]
    start = dt.datetime(2025, 12, 1, tzinfo=dt.UTC)
    url = env.database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        period = conn.execute("SELECT name FROM periods WHERE status = 'open'").fetchone()
        assert period is not None
        columns = (
            "reconciliation_key, contract_version, kind, partition_key, document_id, line_ref,"
            " job_id, outcome, amount, claimed_amount, delta, created_at, period"
        )
        with conn.cursor().copy(f"COPY ledger_entries ({columns}) FROM STDIN") as copy:
            for n, amount in enumerate(amounts):
                key = hashlib.sha256(f"bench-remit-{seed}-{n}".encode()).hexdigest()
                when = start + dt.timedelta(seconds=n * 31_536_000 // max(1, documents))
                copy.write_row(
                    (
                        key,
                        1,
                        DEDUCTION_KIND,
                        PARTITION,
                        f"DOC-{n:07d}",
                        "1",
                        f"job_bench_{n // 500_000}",
                        "posted",
                        amount,
                        amount,
                        amount,
                        when,
                        period[0],
                    )
                )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) ledger_entries")
    return amounts


def x12_820(
    lines: int, deductions_n: int, picks: list[int], amounts: list[Decimal], trace: str
) -> bytes:
    """The 820: ``picks`` are the documents its deductions take (the first half by
    reference, the second by amount)."""
    segments = [
        "ISA*00*          *00*          *ZZ*BENCHPAYER     *ZZ*SETTLEQ        "
        "*261207*1200*^*00501*000000001*0*P*>",
        "GS*RA*BENCHPAYER*SETTLEQ*20261207*1200*1*X*005010",
        "ST*820*0001",
    ]
    body: list[str] = []
    paid_total = Decimal(0)
    by_reference = deductions_n // 2
    for n in range(lines):
        invoiced = Decimal(1000 + n % 900) + Decimal(n % 100) / 100
        if n < deductions_n:
            document = picks[n]
            taken = amounts[document]
            reference = f"DOC-{document:07d}" if n < by_reference else f"INV-{n:07d}"
            paid = invoiced - taken
            body.append(f"RMR*IV*INV-{n:07d}**{paid}*{invoiced}")
            body.append(f"ADX*-{taken}*02*CM*{reference}")
        else:
            paid = invoiced
            body.append(f"RMR*IV*INV-{n:07d}**{paid}*{invoiced}")
        paid_total += paid
    segments += [
        f"BPR*I*{paid_total}*C*ACH************20261207",
        f"TRN*1*{trace}",
        f"N1*PR*BENCH PAYER*ZZ*{SENDER}",
        "ENT*1",
        *body,
    ]
    count = len(segments) - 2 + 1
    segments += [f"SE*{count}*0001", "GE*1*1", "IEA*1*000000001"]
    return ("~\n".join(segments) + "~\n").encode()


def picks_of(amounts: list[Decimal], n: int, rng: random.Random, taken: set[int]) -> list[int]:
    """N distinct documents, none taken before: the first half (taken by
    reference) any, the second half (taken by amount) each the only document
    of its amount, so that the oldest document within tolerance is the one
    picked and no two deductions reach for one document."""
    counts: dict[Decimal, int] = {}
    for amount in amounts:
        counts[amount] = counts.get(amount, 0) + 1
    chosen: list[int] = []
    while len(chosen) < n:
        d = rng.randrange(len(amounts))
        by_amount = len(chosen) >= n // 2
        if d in taken or (by_amount and counts[amounts[d]] != 1):
            continue
        taken.add(d)
        chosen.append(d)
    return chosen


def over_http(env: ServiceEnv, data: bytes, logs: Path) -> tuple[float, float, dict[str, Any]]:
    stack = Stack(env, logs)
    try:
        stack.start_api()
        operator = Client(stack.url, token=OPERATOR_TOKEN, timeout=600)
        profile = {"name": "Bench payer", "contract_version": 1, "payer_partition_key": PARTITION}
        put = operator.bearer("PUT", f"/v1/partners/ZZ/{SENDER}", profile)
        assert put.status_code in (200, 201), put.text
        producer = Client(stack.url, key_id=PRODUCER_ID, secret=PRODUCER_SECRET, timeout=600)
        started = time.perf_counter()
        answer = producer.signed(
            "POST", "/v1/remittances", data, {"Content-Type": "application/edi-x12"}
        )
        seconds = time.perf_counter() - started
        assert answer.status_code == 201, answer.text[:2000]
        rss, _ = process_stats(stack.processes["api"].pid)
        return seconds, rss, answer.json()["remittances"][0]
    finally:
        stack.stop()


def in_process(env: ServiceEnv, data: bytes) -> tuple[list[float], float, store.Recorded]:
    """Each match's seconds, the one-off sum's, and the remittance recorded."""
    timings: list[float] = []
    summed: list[float] = []
    candidates = open_documents.OpenDocuments.candidates
    take = open_documents.OpenDocuments.take
    sum_all = open_documents.OpenDocuments._sum_all
    clock: dict[str, float] = {}

    def timed_candidates(self: Any, claim: Any, tolerance: Any) -> Any:
        clock["start"] = time.perf_counter()
        return candidates(self, claim, tolerance)

    def timed_sum_all(self: Any) -> None:
        if self._summed:
            return
        started = time.perf_counter()
        sum_all(self)
        summed.append(time.perf_counter() - started)
        clock["start"] += summed[-1]  # the one-off sum is not a match's cost

    def timed_take(self: Any, decision: Any) -> None:
        take(self, decision)
        timings.append(time.perf_counter() - clock["start"])

    open_documents.OpenDocuments.candidates = timed_candidates  # type: ignore[method-assign]
    open_documents.OpenDocuments.take = timed_take  # type: ignore[method-assign]
    open_documents.OpenDocuments._sum_all = timed_sum_all  # type: ignore[method-assign]
    engine = make_engine(env.database_url)
    try:
        [remittance] = read_820(data).remittances
        incoming = store.Incoming(PRODUCER_ID, SENDER, remittance, Profile(PARTITION), "x12", None)
        recorded = store.record(engine, incoming, dt.datetime.now(dt.UTC))
    finally:
        open_documents.OpenDocuments.candidates = candidates  # type: ignore[method-assign]
        open_documents.OpenDocuments.take = take  # type: ignore[method-assign]
        open_documents.OpenDocuments._sum_all = sum_all  # type: ignore[method-assign]
        engine.dispose()
    return timings, sum(summed), recorded


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--deductions", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=53)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with isolated_env("brem") as env:
        started = time.perf_counter()
        amounts = fill(env, args.documents, args.seed)
        print(f"filled {args.documents:,} documents in {time.perf_counter() - started:.1f} s")
        taken: set[int] = set()
        first = x12_820(
            args.lines,
            args.deductions,
            picks_of(amounts, args.deductions, rng, taken),
            amounts,
            "BENCH-1",
        )
        second = x12_820(
            args.lines,
            args.deductions,
            picks_of(amounts, args.deductions, rng, taken),
            amounts,
            "BENCH-2",
        )
        print(f"820: {len(first):,} bytes, {args.lines:,} RMR, {args.deductions:,} promotion ADX")
        logs = Path("bench/logs")
        logs.mkdir(parents=True, exist_ok=True)
        seconds, rss, answer = over_http(env, first, logs)
        timings, summed, recorded = in_process(env, second)
        engine = make_engine(env.database_url)
        with engine.connect() as conn:
            deducted = conn.execute(
                select(func.count(), func.sum(le.c.amount)).where(le.c.outcome == "deducted")
            ).one()
            rows = conn.execute(select(func.count()).select_from(deductions)).scalar_one()
        engine.dispose()
    ms = sorted(t * 1000 for t in timings)
    p95 = ms[int(len(ms) * 0.95) - 1]
    both = 2 * args.deductions
    checks = {
        "HTTP: every promotion deduction matched, none disputed": (
            answer["deductions"] == args.deductions and Decimal(answer["disputed"]) == 0
        ),
        "in process: every promotion deduction matched, none disputed": (
            recorded.deductions == args.deductions and recorded.disputed == 0
        ),
        f"{both:,} deduction rows and {both:,} deducted ledger rows": (
            rows == both and deducted[0] == both
        ),
        "deducted rows add up to what both remittances matched": (
            deducted[1] == Decimal(answer["matched"]) + recorded.matched
        ),
    }
    for name, passed in checks.items():
        print(f"  {'ok ' if passed else 'BAD'} {name}")
    print()
    print("| figure | measured | target |")
    print("|---|---:|---:|")
    print(f"| 820 matched over HTTP (request to answer) | {seconds:.2f} s | ≤ 10 s |")
    print(f"| a match, p95 (in process, {len(ms):,} matches) | {p95:.3f} ms | ≤ 2 ms |")
    print(f"| a match, p50 / max | {statistics.median(ms):.3f} / {ms[-1]:.3f} ms | |")
    print(f"| the partition's open amounts summed once | {summed:.2f} s | |")
    print(f"| API peak RSS | {rss:.0f} MiB | ≤ 300 MiB |")
    print(
        f"\nratios: the one-off sum is {summed / seconds:.0%} of the HTTP match;"
        f" matches are {sum(ms) / 1000 / seconds:.0%} of it"
    )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
