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
    python -m bench.run --ledger-rows 20000000   # cost growth: a run on an
        # empty ledger, then one on a ledger holding 20M rows of earlier quarters
        # (bench/ledger_fill.py), and how their lines/s and the ledger's size compare
    python -m bench.run --repeat 10     # sustained load: 10 claims back to back,
        # each verified; lines/s and every process's peak RSS claim by claim
    python -m bench.run --postgres both  # PostgreSQL's defaults, then the server
        # settings of docker/compose.yaml, compared (bench/server.py)

Before the stack starts, ``bench.floor`` runs the same lines on the same
server (one process doing the least work exactly-once posting needs), and the
report gives settleq's lines/s over the floor's: the figure this machine's
day-to-day speed does not move.

PostgreSQL is a durable cluster of the bench's own (initdb under TMPDIR),
started with docker/compose.yaml's server settings; --postgres stock starts it
with PostgreSQL's defaults, --postgres machine uses the machine's server.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.claim import run_claim, wait_for_events
from bench.floor import Floor, floor_on
from bench.ledger_fill import FORMATS, fill

# Re-exported: the other benches import them from here.
from bench.procstats import (  # noqa: F401
    TICK,
    descendants,
    machine_cpu,
    process_stats,
    service_cpu,
)
from bench.report import Session, compare_ledgers, compare_servers, report
from bench.server import SERVERS, describe, server, servers
from tests.support.infra import ServiceEnv, isolated_env
from tests.support.stack import Stack
from tests.support.workload import CONTRACT, Generated, generate, ndjson


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--vendors", type=int, default=50)
    parser.add_argument("--small-batches", type=int, default=20)
    parser.add_argument("--flush-redis-at", type=float, default=None)
    parser.add_argument(
        "--close-at",
        type=float,
        default=None,
        metavar="PROGRESS",
        help="close the open booking period once the claim's progress reaches this (0.5:"
        " halfway), and check every row is booked once and both journals add up",
    )
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
        help="any other setting for every process, e.g. --set relay_grace_s=5",
    )
    parser.add_argument(
        "--ledger-rows",
        type=int,
        default=0,
        metavar="N",
        help="fill the ledger with N rows of earlier quarters (by COPY) before the run",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="with --ledger-rows: skip the empty-ledger run it is compared with",
    )
    parser.add_argument(
        "--fill-format", choices=FORMATS, default="text", help="the fill's COPY format"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="K", help="K claims back to back, each verified"
    )
    parser.add_argument(
        "--postgres",
        choices=SERVERS,
        default="tuned",
        help="tuned: a private cluster with docker/compose.yaml's server settings;"
        " stock: with PostgreSQL's defaults; both: stock then tuned, compared;"
        " machine: the machine's server",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    started_gen = time.monotonic()
    data = generate(args.lines, args.vendors)
    body = ndjson(data.documents)
    total = sum(len(d["lines"]) for d in data.documents)
    print(
        f"generated {total} lines, {len(body) / 1e6:.1f} MB NDJSON in "
        f"{time.monotonic() - started_gen:.1f} s"
    )
    kinds = servers(args.postgres)
    by_server: dict[str, list[Session]] = {}
    for kind in kinds:
        if len(kinds) > 1:
            print(f"\n# PostgreSQL: {kind}")
        sessions = by_server[kind] = []
        if args.ledger_rows and not args.no_baseline:
            print("\n## empty ledger")
            sessions.append(run_session(args, data, body, total, "empty ledger", 0, kind))
            report(sessions[-1])
        if args.ledger_rows:
            print(f"\n## ledger holding {args.ledger_rows:,} rows of earlier quarters")
        label = f"{args.ledger_rows:,} rows of history" if args.ledger_rows else "run"
        sessions.append(run_session(args, data, body, total, label, args.ledger_rows, kind))
        report(sessions[-1])
        if len(sessions) == 2:
            compare_ledgers(*sessions)
    if len(kinds) > 1:
        compare_servers({kind: sessions[-1] for kind, sessions in by_server.items()})
    return 0 if all(m.ok for ss in by_server.values() for s in ss for m in s.claims) else 1


def run_session(
    args: argparse.Namespace,
    data: Generated,
    body: bytes,
    total: int,
    label: str,
    rows: int,
    kind: str,
) -> Session:
    """On a server of ``kind``: fill the ledger with ``rows`` of history, start a
    stack, post the claims."""
    with server(kind) as admin:
        print(describe(kind, admin))
        # The floor first, on the same server, in a database of its own: the
        # figure settleq's lines/s is divided by (bench/floor.py).
        floor = floor_on(admin, body)
        print(floor.report())
        with isolated_env("bench", admin) as env:
            return _session_on(args, data, body, total, label, rows, env, floor)


def _session_on(
    args: argparse.Namespace,
    data: Generated,
    body: bytes,
    total: int,
    label: str,
    rows: int,
    env: ServiceEnv,
    floor: Floor,
) -> Session:
    """On the database of ``env``: fill the ledger with ``rows`` of history, start
    a stack, post the claims."""
    # Before the stack starts: nothing of the run is in the ledger yet.
    filled = fill(env.database_url, rows, args.fill_format) if rows else None
    if filled:
        print(filled.report())
    stack = start_stack(args, env)
    try:
        operator = stack.operator()
        for vendor in [f"VENDOR-{n:04d}" for n in range(args.vendors)] + ["VENDOR-SMALL"]:
            operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
        producer = stack.producer()
        earlier = producer.submit(
            json.dumps({"kind": "promo_accrual", "documents": data.earlier}).encode()
        )
        producer.wait(earlier.json()["job_id"], timeout=300)
        wait_for_events(env.database_url, time.monotonic())  # the relay starts from none
        claims = []
        for k in range(args.repeat):
            if args.repeat > 1:
                print(f"claim {k + 1} of {args.repeat}:")
            claims.append(
                run_claim(
                    stack,
                    env,
                    body if k == 0 else ndjson(relabelled(data, k)),
                    data.expect,
                    total,
                    small=args.small_batches,
                    flush_redis_at=args.flush_redis_at,
                    close_at=args.close_at if k == 0 else None,
                )
            )
    finally:
        stack.stop()
    return Session(label, claims, filled, floor)


def relabelled(data: Generated, k: int) -> list[dict[str, Any]]:
    """The claim again under new document ids (new keys, so every line posts anew);
    the earlier batch's documents keep theirs, to be its duplicates once more.
    Amounts and outcomes do not depend on ids: the expectation holds unchanged."""
    earlier = {d["document_id"] for d in data.earlier}
    return [
        d if d["document_id"] in earlier else {**d, "document_id": f"{d['document_id']}-R{k}"}
        for d in data.documents
    ]


def start_stack(args: argparse.Namespace, env: ServiceEnv) -> Stack:
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
    stack = Stack(env, logs, **tuning)
    try:
        stack.start_api()
        for entry in args.workers.split(","):
            tier, count = entry.split(":")
            for i in range(int(count)):
                stack.start_worker(tier, name=f"{tier}-{i}")
        stack._spawn("relay", ["relay"])
    except BaseException:
        stack.stop()
        raise
    return stack


def _stop_on_sigterm() -> None:
    """A SIGTERM (``kill``, ``timeout``) unwinds like Ctrl-C: the stack stops and
    the private PostgreSQL cluster and its data directory go."""

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)


if __name__ == "__main__":
    _stop_on_sigterm()
    sys.exit(main())
