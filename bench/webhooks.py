"""settleq webhooks bench: what producers hear back, and what it costs settlement.

On a stack of real processes (API, fast_path, compute_heavy and the webhooks
component, PostgreSQL and RabbitMQ), ``--jobs`` small jobs (default 1,000)
are submitted by four threads and complete with one endpoint registered (a
receiver on 127.0.0.1). Each round runs three phases, in turn:

- ``none``: no endpoint; settlement's lines/s with nothing to deliver;
- ``healthy``: an endpoint answering 200 at once; lines/s, and each
  ``job.completed``'s latency from its commit to its arrival (the event's
  ``created_at`` is its transaction's time: the commit follows within the
  transaction's few milliseconds);
- ``hanging``: an endpoint that holds every request 15 s (each attempt times
  out at 10 s, every webhooks thread waits on it); lines/s.

Then a backlog drain: the webhooks process stopped, ``--jobs`` jobs
completed, the process started again; deliveries/s until all are delivered.

    python -m bench.webhooks              # 1,000 jobs a phase, one round
    python -m bench.webhooks --rounds 3   # three rounds, phases alternated
    python -m bench.webhooks --jobs 200   # quick mode

lines/s is the phase's lines over the time from its first submission to its
last job's completion; the figures to compare are the phases' ratios within
a round (this machine's speed varies day to day, not within minutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import outbox as webhook_events
from shared.domain.synthetic import promo_batch, promo_contract
from tests.support.infra import isolated_env
from tests.support.receiver import Answer, Receiver
from tests.support.stack import Stack

LOGS = Path("bench/logs/webhooks")
LINES_PER_JOB = 20
VENDORS = 4
SUBMITTERS = 4


def _jobs(stack: Stack, count: int, seed: int) -> list[str]:
    """Submit ``count`` jobs from SUBMITTERS threads; their ids."""

    def submit(n: int) -> str:
        batch = promo_batch(
            LINES_PER_JOB, vendors=VENDORS, seed=seed * 100_000 + n, document_prefix=f"B{seed}"
        )
        answer = clients[n % SUBMITTERS].submit(json.dumps(batch).encode())
        assert answer.status_code == 202, answer.text
        job_id: str = answer.json()["job_id"]
        return job_id

    clients = [stack.producer() for _ in range(SUBMITTERS)]
    with ThreadPoolExecutor(SUBMITTERS) as pool:
        return list(pool.map(submit, range(count)))


def _completed(engine: Engine, job_ids: list[str]) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    webhook_events.c.type == "job.completed",
                    webhook_events.c.subject.in_(job_ids),
                )
            ).scalar_one()
        )


def _settle(stack: Stack, engine: Engine, count: int, seed: int) -> tuple[list[str], float]:
    """``count`` jobs submitted and completed; their ids and lines/s."""
    started = time.perf_counter()
    job_ids = _jobs(stack, count, seed)
    while _completed(engine, job_ids) < count:
        time.sleep(0.05)
    wall = time.perf_counter() - started
    return job_ids, count * LINES_PER_JOB / wall


def _endpoint(stack: Stack, receiver: Receiver) -> str:
    body = {"url": receiver.url, "events": ["job.completed"]}
    made = stack.producer().signed_json("POST", "/v1/webhook-endpoints", body)
    assert made.status_code == 201, made.text
    endpoint_id: str = made.json()["id"]
    return endpoint_id


def _drop(stack: Stack, endpoint_id: str) -> None:
    stack.producer().signed("DELETE", f"/v1/webhook-endpoints/{endpoint_id}")


def _latencies(receiver: Receiver, job_ids: list[str]) -> list[float]:
    wanted = set(job_ids)
    found = []
    for got in receiver.received:
        event = json.loads(got.body)
        if event["data"]["job_id"] in wanted:
            created = datetime.fromisoformat(event["created_at"].replace("Z", "+00:00"))
            found.append(got.at - created.timestamp())
    return found


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def round_(stack: Stack, engine: Engine, jobs: int, seed: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    _, result["none"] = _settle(stack, engine, jobs, seed)
    receiver = Receiver()
    endpoint_id = _endpoint(stack, receiver)
    job_ids, result["healthy"] = _settle(stack, engine, jobs, seed + 1)
    receiver.wait_for(jobs, timeout=300)
    latencies = _latencies(receiver, job_ids)
    result["latency_median_s"] = statistics.median(latencies)
    result["latency_p99_s"] = _pct(latencies, 0.99)
    _drop(stack, endpoint_id)
    receiver.close()
    hanging = Receiver(default=Answer(200, pause_s=15))
    endpoint_id = _endpoint(stack, hanging)
    _, result["hanging"] = _settle(stack, engine, jobs, seed + 2)
    result["hanging_requests_during"] = len(hanging.received)
    _drop(stack, endpoint_id)
    hanging.close()
    return result


def drain(stack: Stack, engine: Engine, jobs: int, seed: int) -> float:
    """Deliveries/s of a backlog of ``jobs`` events to one healthy endpoint."""
    receiver = Receiver()
    endpoint_id = _endpoint(stack, receiver)
    stack.stop_one("webhooks")
    _settle(stack, engine, jobs, seed)
    stack.start_worker("webhooks")
    first = receiver.wait_for(1, timeout=60)[0].at
    last = receiver.wait_for(jobs, timeout=600)[-1].at
    _drop(stack, endpoint_id)
    receiver.close()
    return (jobs - 1) / (last - first) if last > first else float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs a phase")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    LOGS.mkdir(parents=True, exist_ok=True)
    with isolated_env("bwh") as env:
        stack = Stack(env, LOGS, webhook_allow_private=True)
        engine = make_engine(env.database_url)
        try:
            stack.start()
            stack.start_worker("webhooks")
            stack._spawn("relay", ["relay"])  # it fans the events out to the endpoints
            for vendor in range(VENDORS):
                path = f"/v1/contracts/promo_accrual/VENDOR-{vendor:04d}/1"
                assert stack.operator().bearer("PUT", path, promo_contract()).status_code == 201
            _settle(stack, engine, 50, seed=1)  # warm-up
            rounds = [round_(stack, engine, args.jobs, 10 + 10 * r) for r in range(args.rounds)]
            rate = drain(stack, engine, args.jobs, seed=999)
        finally:
            engine.dispose()
            stack.stop()
    print(f"{args.jobs} jobs of {LINES_PER_JOB} lines a phase, {SUBMITTERS} submitters")
    print("round  lines/s none  healthy  hanging  hanging/none  latency median  p99")
    for n, r in enumerate(rounds, 1):
        print(
            f"{n:5d}  {r['none']:12,.0f}  {r['healthy']:7,.0f}  {r['hanging']:7,.0f}"
            f"  {r['hanging'] / r['none']:12.2f}  {r['latency_median_s'] * 1000:11.0f} ms"
            f"  {r['latency_p99_s'] * 1000:5.0f} ms"
        )
    print(f"backlog of {args.jobs} events drained at {rate:,.0f} deliveries/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
