"""settleq benchmark: a quarterly vendor claim end to end on a real stack.

Generates a deterministic promo_accrual batch (default 500,000 lines over 50
vendors, 2% disputed, 1% repeated from an earlier batch), posts it as NDJSON
to a stack of real processes on PostgreSQL, RabbitMQ and Redis, waits for the
job, checks the ledger against the generator's own expectation and prints
accept time, end-to-end time, lines/s, peak RSS and CPU seconds per process,
and the latency of small batches sent by another vendor during the run.

    python -m bench.run                 # 500,000 lines
    python -m bench.run --lines 20000   # quick mode
    python -m bench.run --flush-redis-at 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import func, select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.faults import Faults
from tests.support.infra import REDIS_URL, isolated_env
from tests.support.stack import Stack
from tests.support.workload import CONTRACT, Expectation, generate, ndjson

TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def process_stats(pid: int) -> tuple[float, float]:
    """(peak RSS in MiB, CPU seconds) of a process and its descendants."""
    peak = cpu = 0.0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]) / 1024)
        cpu += (int(fields[11]) + int(fields[12])) / TICK
    return peak, cpu


def machine_cpu() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of the whole machine so far."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / TICK, iowait / TICK


def service_cpu() -> dict[str, float]:
    """CPU seconds so far of the services settleq runs on (all their processes)."""
    names = {"postgres": "postgres", "redis-server": "redis", "beam.smp": "rabbitmq"}
    totals = dict.fromkeys(names.values(), 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if comm in names:
            fields = stat.rsplit(")", 1)[1].split()
            totals[names[comm]] += (int(fields[11]) + int(fields[12])) / TICK
    return totals


def small_batches(stack: Stack, count: int, stop: threading.Event) -> list[float]:
    """Send 10-line batches from another vendor during the big run; their latencies."""
    client = stack.producer()
    latencies = []
    for n in range(count):
        if stop.wait(0.5):
            break
        doc = {
            "document_id": f"SMALL-{n}-{time.time_ns()}",
            "partition_key": "VENDOR-SMALL",
            "contract_version": 1,
            "period": "2026-Q3",
            "lines": [
                {
                    "line_no": i,
                    "sku": f"S{i}",
                    "promo_tier": "T1",
                    "qualifying_units": "8",
                    "claimed_amount": "1.00",
                }
                for i in range(1, 11)
            ],
        }
        started = time.monotonic()
        response = client.submit(json.dumps({"kind": "promo_accrual", "documents": [doc]}).encode())
        job = client.wait(response.json()["job_id"], timeout=120, poll=0.05)
        if job["state"] == "completed":
            latencies.append(time.monotonic() - started)
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--vendors", type=int, default=50)
    parser.add_argument("--small-batches", type=int, default=10)
    parser.add_argument("--flush-redis-at", type=float, default=None)
    parser.add_argument(
        "--workers",
        default="fast_path:1,compute_heavy:2",
        help="tier:processes,... (one process per entry)",
    )
    parser.add_argument("--threads", type=int, default=None, help="worker threads per process")
    parser.add_argument("--chunk-documents", type=int, default=None)
    parser.add_argument("--chunk-lines", type=int, default=None)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any other setting for every process, e.g. --set relay_nice=19",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="fault injection for every process (shared/faults.py): --fault settle_pause_s=0.1",
    )
    args = parser.parse_args()

    started_gen = time.monotonic()
    data = generate(args.lines, args.vendors)
    body = ndjson(data.documents)
    total = sum(len(d["lines"]) for d in data.documents)
    print(
        f"generated {total} lines, {len(body) / 1e6:.1f} MB NDJSON in "
        f"{time.monotonic() - started_gen:.1f} s"
    )

    with isolated_env("bench") as env:
        logs = Path("bench/logs")
        logs.mkdir(parents=True, exist_ok=True)
        tuning = {
            name: value
            for name, value in (
                ("worker_threads", args.threads),
                ("max_chunk_documents", args.chunk_documents),
                ("max_chunk_lines", args.chunk_lines),
            )
            if value is not None
        }
        tuning.update(item.split("=", 1) for item in args.set)
        faults = Faults(**dict(item.split("=", 1) for item in args.fault)) if args.fault else None
        stack = Stack(env, logs, faults=faults, **tuning)
        try:
            stack.start_api()
            for entry in args.workers.split(","):
                tier, count = entry.split(":")
                for i in range(int(count)):
                    stack.start_worker(tier, name=f"{tier}-{i}")
            stack._spawn("relay", ["relay"])
            operator = stack.operator()
            for vendor in [f"VENDOR-{n:04d}" for n in range(args.vendors)] + ["VENDOR-SMALL"]:
                operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
            producer = stack.producer()
            earlier = producer.submit(
                json.dumps({"kind": "promo_accrual", "documents": data.earlier}).encode()
            )
            producer.wait(earlier.json()["job_id"], timeout=300)
            wait_for_events(env.database_url, time.monotonic())  # the relay starts from none

            stop = threading.Event()
            latencies: list[float] = []
            sender = threading.Thread(
                target=lambda: latencies.extend(small_batches(stack, args.small_batches, stop))
            )
            busy0, wait0 = machine_cpu()
            services0 = service_cpu()
            # Start-up work (imports, connections) is not the batch's: CPU counts from here.
            started_cpu = {name: process_stats(p.pid)[1] for name, p in stack.processes.items()}
            t0 = time.monotonic()
            response = httpx.post(
                f"{stack.url}/v1/batches",
                content=body,
                headers={**_signed(stack, body), "Content-Type": "application/x-ndjson"},
                timeout=600,
            )
            accept_s = time.monotonic() - t0
            assert response.status_code == 202, response.text
            job_id = response.json()["job_id"]
            sender.start()
            flushed = False
            while True:
                job = producer.job(job_id)
                if (
                    args.flush_redis_at is not None
                    and not flushed
                    and job["progress"] >= args.flush_redis_at
                ):
                    redis.Redis.from_url(REDIS_URL).flushdb()
                    flushed = True
                    print(f"flushed Redis at progress {job['progress']}")
                if job["state"] == "completed":
                    break
                time.sleep(0.05)
            e2e_s = time.monotonic() - t0
            busy1, wait1 = machine_cpu()
            services = {k: v - services0[k] for k, v in service_cpu().items()}
            stats = {
                name: (rss, cpu - started_cpu.get(name, 0.0))
                for name, (rss, cpu) in (
                    (name, process_stats(p.pid)) for name, p in stack.processes.items()
                )
            }
            events_s = wait_for_events(env.database_url, t0)
            # The relay's CPU until its last event, not just until the job completed.
            relay_cpu = process_stats(stack.processes["relay"].pid)[1] - started_cpu["relay"]
            events = ledger_rows(env.database_url, job_id)
            stop.set()
            sender.join()
            ok = verify(env.database_url, job, data.expect, total)
        finally:
            stack.stop()

    print()
    print(
        "| lines | accept (POST→202) | end to end | lines/s "
        f"| small-batch latency (median of {len(latencies)}) |"
    )
    print("|---|---|---|---|---|")
    median = statistics.median(latencies) if latencies else float("nan")
    print(f"| {total} | {accept_s:.2f} s | {e2e_s:.2f} s | {total / e2e_s:,.0f} | {median:.2f} s |")
    print(
        f"\nlast outcome event published {events_s:.2f} s after the POST,"
        f" {events_s - e2e_s:.2f} s after the job completed (the relay's lag);"
        f" relay CPU until then {relay_cpu:.1f} s, {relay_cpu / events * 1e6:.1f} µs"
        f" an event ({events} events)"
    )
    print()
    print("| process | peak RSS | CPU s (POST → completed) | CPU µs/line |")
    print("|---|---|---|---|")
    cpu_total = 0.0
    for name, (rss, cpu) in stats.items():
        cpu_total += cpu
        print(f"| {name} | {rss:.0f} MiB | {cpu:.1f} | {cpu / total * 1e6:.1f} |")
    print(f"| all settleq processes | | {cpu_total:.1f} | {cpu_total / total * 1e6:.1f} |")
    for name, cpu in services.items():
        print(f"| {name} (during the run) | | {cpu:.1f} | {cpu / total * 1e6:.1f} |")
    cores = os.cpu_count() or 1
    print(
        f"\nmachine: {(busy1 - busy0) / (e2e_s * cores):.0%} of {cores} cores busy, "
        f"{(wait1 - wait0) / (e2e_s * cores):.0%} waiting on I/O, during the run"
    )
    print(f"small-batch latencies: {', '.join(f'{x:.2f}' for x in latencies)} s")
    print(
        f"\nratios: {total / e2e_s / os.cpu_count():,.0f} lines/s per core; "
        f"accept {accept_s / e2e_s:.0%} of end to end; verification {'OK' if ok else 'FAILED'}"
    )
    return 0 if ok else 1


def _signed(stack: Stack, body: bytes) -> dict[str, str]:
    from shared.domain.signing import sign_request
    from tests.support.infra import PRODUCER_ID, PRODUCER_SECRET

    return {
        "X-Key-Id": PRODUCER_ID,
        "X-Signature": sign_request(PRODUCER_SECRET, int(time.time()), "POST", "/v1/batches", body),
    }


def wait_for_events(url: str, t0: float, timeout: float = 600) -> float:
    """Seconds from ``t0`` until the relay has published every outcome event."""
    outbox = tables.outbox
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            while time.monotonic() - t0 < timeout:
                waiting = conn.execute(
                    select(func.count()).select_from(outbox).where(outbox.c.published_at.is_(None))
                ).scalar()
                conn.rollback()
                if not waiting:
                    break
                time.sleep(0.05)
    finally:
        engine.dispose()
    return time.monotonic() - t0


def ledger_rows(url: str, job_id: str) -> int:
    """The job's outcome events: one per ledger row."""
    ledger = tables.ledger_entries
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            count = select(func.count()).select_from(ledger).where(ledger.c.job_id == job_id)
            return int(conn.execute(count).scalar_one())
    finally:
        engine.dispose()


def verify(url: str, job: dict[str, Any], expect: Expectation, total: int) -> bool:
    ledger = tables.ledger_entries
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                ledger.c.outcome,
                func.count(),
                func.sum(ledger.c.amount),
                func.sum(ledger.c.claimed_amount),
            )
            .where(ledger.c.job_id == job["job_id"])
            .group_by(ledger.c.outcome)
        ).all()
        worst = conn.execute(
            select(func.count())
            .select_from(ledger)
            .group_by(ledger.c.reconciliation_key, ledger.c.contract_version)
            .order_by(func.count().desc())
            .limit(1)
        ).scalar()
    engine.dispose()
    by = {r[0]: r for r in rows}
    checks = {
        "counters add up": sum(job["outcomes"].values()) == job["lines"] == total,
        "posted count": job["outcomes"]["posted"] == expect.posted == by["posted"][1],
        "disputed count": job["outcomes"]["disputed"] == expect.disputed == by["disputed"][1],
        "duplicates": job["outcomes"]["duplicate"] == expect.duplicate,
        "no dead letters": job["outcomes"]["dead_lettered"] == 0,
        "posted amount": Decimal(job["amounts"]["posted"])
        == expect.amount_posted
        == by["posted"][2],
        "disputed amount": Decimal(job["amounts"]["disputed"])
        == expect.amount_disputed
        == by["disputed"][3],
        "one row per identity": worst == 1,
    }
    for name, passed in checks.items():
        print(f"  {'ok ' if passed else 'BAD'} {name}")
    return all(checks.values())


if __name__ == "__main__":
    sys.exit(main())
