"""settleq benchmark of a bulk requeue of dead letters, on PostgreSQL and RabbitMQ
(issue 42 item 12's figure).

Settles a promo_accrual claim of single-line documents (default 20,000) at a
contract version not yet published, through the real settlement code in this
process (``settle_chunk`` on stored chunks): every document is dead-lettered
``unknown_contract_version``. Then the version is published and the API (in
this process, over HTTP through Starlette's test client) is asked for one bulk
requeue of 10,000 (``POST /admin/dead-letters/requeue``, reason
``unknown_contract_version``, limit 10,000), target <= 5 s. With
``--over-http`` the API is its own process (``settleq api``, as deployed) and
the request goes over a real socket: the figure an operator's
``settleq dlq requeue --all`` sees.

Checked afterwards: exactly 10,000 letters ``requeued`` (each once: requeues =
1), the rest still ``dead``, one audit entry each, and 10,000 confirmed
messages on the fast_path queue. Its own database and queues, dropped at the end.

    python -m bench.requeue                       # 20,000 dead, requeue 10,000
    python -m bench.requeue --dead 4000 --requeue 2000   # quick mode
    python -m bench.requeue --over-http           # the API as its own process
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from services.api.app import create_app
from services.commands.client import Client
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import make_context
from shared.adapters.db import tables
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import OPERATOR_TOKEN, ServiceEnv, isolated_env, queue_depth
from tests.support.stack import Stack

TARGET_S = 5.0
VENDORS = 20


def claim(documents: int) -> list[dict[str, Any]]:
    return [
        {
            "document_id": f"RQ-{n:07d}",
            "partition_key": f"VENDOR-{n % VENDORS:04d}",
            "contract_version": 1,
            "period": "2026-Q3",
            "lines": [
                {
                    "line_no": 1,
                    "sku": f"SKU-{n:06d}",
                    "promo_tier": "T1",
                    "qualifying_units": "8",
                    "claimed_amount": "1.00",
                }
            ],
        }
        for n in range(documents)
    ]


def dead_letter_all(env: ServiceEnv, documents: list[dict[str, Any]]) -> float:
    """Settle with no contract published: every document a dead letter; seconds."""
    settings = env.settings(max_chunk_documents=750)
    broker = build_broker(settings)
    ctx = make_context(settings, broker)
    try:
        started = time.monotonic()
        _, messages = store_job(ctx.engine, settings, ctx.internal_key, documents)
        for message in messages:
            stages.settle_chunk(ctx, message, 1)
        publish_promo_contracts(ctx.engine, sorted({d["partition_key"] for d in documents}))
        return time.monotonic() - started
    finally:
        ctx.engine.dispose()
        broker.close()


def checks(env: ServiceEnv, dead: int, requeue: int, answer: dict[str, Any]) -> dict[str, bool]:
    settings = env.settings()
    broker = build_broker(settings)
    ctx = make_context(settings, broker)
    letters, audit = tables.dead_letters, tables.audit_log
    try:
        with ctx.engine.connect() as conn:
            by_status = dict(
                conn.execute(
                    select(letters.c.status, func.count()).group_by(letters.c.status)
                ).all()
            )
            twice = conn.execute(select(func.count()).where(letters.c.requeues > 1)).scalar_one()
            audits = conn.execute(
                select(func.count()).where(audit.c.action == "dead_letter.requeue")
            ).scalar_one()
    finally:
        ctx.engine.dispose()
        broker.close()
    return {
        f"answer says {requeue} requeued": answer.get("requeued") == requeue,
        f"{requeue} letters requeued": by_status.get("requeued") == requeue,
        f"{dead - requeue} still dead": by_status.get("dead", 0) == dead - requeue,
        "none requeued twice": twice == 0,
        "one audit entry each": audits == requeue,
        f"{requeue} messages on fast_path": queue_depth(env.queue_prefix, "fast_path") == requeue,
    }


@contextmanager
def operator_client(env: ServiceEnv, over_http: bool) -> Iterator[Client]:
    """The operator's client of an API in this process (Starlette's test
    client), or of an API process of its own over a real socket."""
    if not over_http:
        with TestClient(create_app(env.settings())) as http:
            yield Client("http://testserver", token=OPERATOR_TOKEN, http=http)
        return
    with tempfile.TemporaryDirectory(prefix="bench-requeue-") as logs:
        stack = Stack(env, Path(logs))
        try:
            stack.start_api()
            yield stack.operator()
        finally:
            stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dead", type=int, default=20_000, help="dead letters made")
    parser.add_argument("--requeue", type=int, default=10_000, help="the bulk requeue's limit")
    parser.add_argument(
        "--over-http", action="store_true", help="the API as its own process, over a socket"
    )
    args = parser.parse_args(argv)
    with isolated_env("bench_requeue") as env:
        made = dead_letter_all(env, claim(args.dead))
        print(f"{args.dead} dead letters made in {made:.1f} s")
        with operator_client(env, args.over_http) as operator:
            started = time.monotonic()
            response = operator.bearer(
                "POST",
                "/admin/dead-letters/requeue",
                {"reason": "unknown_contract_version", "limit": args.requeue},
            )
            seconds = time.monotonic() - started
        answer = response.json()
        rate = args.requeue / seconds if seconds else 0.0
        where = "an API process, over a socket" if args.over_http else "the API in process"
        print(
            f"bulk requeue of {args.requeue} ({where}): {seconds:.2f} s ({rate:,.0f} letters/s),"
            f" HTTP {response.status_code}, target <= {TARGET_S:.0f} s"
        )
        results = checks(env, args.dead, args.requeue, answer)
    for name, ok in results.items():
        print(f"  {'ok ' if ok else 'FAIL'} {name}")
    met = seconds <= TARGET_S and all(results.values())
    print("target met" if met else "target NOT met")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
