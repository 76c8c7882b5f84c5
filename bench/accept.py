"""Cost of the front door accepting one large NDJSON (or JSON) batch, in process.

Runs the real app (its lifespan, on real PostgreSQL and RabbitMQ) under
httpx's ASGI transport and posts a deterministic promo_accrual batch (default
500,000 lines) in 64 KiB parts, as uvicorn hands them over. Prints, per run,
POST→202 wall time and CPU µs per line of this process (the client's share
included), of the PostgreSQL backends serving this run's database (and of all
of PostgreSQL, which other work on the machine shares) and of RabbitMQ. Each
run uses its own Idempotency-Key, so each one is a new job.

With ``--uvicorn`` (the figure to quote) the batch goes over a socket to a
real ``settleq api`` process instead, and only that process's CPU is counted
(HTTP parsing included).

With ``--profile`` the same steps (verify, feed, finish, submit) run in this
thread, publishing included, under cProfile, and the top functions by
cumulative and own time are printed.

    python -m bench.accept [--lines 500000] [--runs 3] [--uvicorn | --profile] [--json]

With ``--x12`` a large X12 file of 210s goes to a real API process instead
(``bench/accept_x12.py``: POST→202, the reader's MB/s, the API's peak RSS).

    python -m bench.accept --x12 [--invoices 100000] [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.run import TICK, process_stats, service_cpu
from services.api.app import create_app
from services.api.context import ApiContext
from services.api.intake.ingest import JSON, NDJSON, Ingest
from services.api.submission import submit
from shared.domain.signing import StreamingVerifier, sign_request
from tests.support.infra import PRODUCER_ID, PRODUCER_SECRET, ServiceEnv, isolated_env
from tests.support.stack import Stack
from tests.support.workload import generate, ndjson

PART = 65536  # what uvicorn reads from the socket at a time


def parts(body: bytes) -> Iterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(body), PART):
        yield bytes(view[start : start + PART])


# The body's media type: NDJSON, or with --json the same documents as one JSON body.
MEDIA = [NDJSON]


def headers(body: bytes, run: int) -> dict[str, str]:
    return {
        "X-Key-Id": PRODUCER_ID,
        "X-Signature": sign_request(PRODUCER_SECRET, int(time.time()), "POST", "/v1/batches", body),
        "Content-Type": MEDIA[0],
        "Idempotency-Key": f"bench-accept-{time.time_ns()}-{run}",
    }


def backends_cpu(database_url: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving this database: on
    a shared machine, the other databases' work is not this accept's."""
    with psycopg.connect(database_url) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            )
        ]
    cpu = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
    return cpu


class Meter:
    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.services = service_cpu()
        self.backends = backends_cpu(database_url)

    def report(self, run: int, lines: int, wall: float, cpu: float) -> None:
        services = {k: v - self.services[k] for k, v in service_cpu().items()}
        ours = sum(
            v - self.backends.get(pid, 0.0) for pid, v in backends_cpu(self.database_url).items()
        )
        per = 1e6 / lines
        print(
            f"run {run}: accept {wall:5.2f} s   CPU µs/line: api {cpu * per:5.2f}"
            f"  postgres {ours * per:5.2f} (all {services['postgres'] * per:5.2f})"
            f"  rabbitmq {services['rabbitmq'] * per:5.2f}",
            flush=True,
        )


async def over_http(app: Any, body: bytes, lines: int, runs: int) -> None:
    async def stream() -> AsyncIterator[bytes]:
        for part in parts(body):
            yield part

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for run in range(1, runs + 1):
            meter = Meter(app.state.ctx.settings.database_url)
            cpu, wall = time.process_time(), time.perf_counter()
            response = await client.post(
                "/v1/batches", content=stream(), headers=headers(body, run), timeout=600
            )
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            assert response.status_code == 202, response.text
            assert response.json()["lines"] == lines
            meter.report(run, lines, wall, cpu)


def over_socket(env: ServiceEnv, body: bytes, lines: int, runs: int) -> None:
    logs = Path("bench/logs")
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(env, logs)
    try:
        stack.start_api()
        pid = stack.processes["api"].pid
        with httpx.Client(base_url=stack.url, timeout=600) as client:
            for run in range(1, runs + 1):
                meter = Meter(env.database_url)
                cpu, wall = process_stats(pid)[1], time.perf_counter()
                response = client.post(
                    "/v1/batches", content=parts(body), headers=headers(body, run)
                )
                cpu, wall = process_stats(pid)[1] - cpu, time.perf_counter() - wall
                assert response.status_code == 202, response.text
                meter.report(run, lines, wall, cpu)
        print(f"api peak RSS {process_stats(pid)[0]:.0f} MiB (the body is {len(body) >> 20} MiB)")
    finally:
        stack.stop()


class InThread(Executor):
    """Runs "parallel" publishes in the calling thread, where cProfile sees them."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def profiled(ctx: ApiContext, body: bytes, lines: int) -> None:
    ctx.publishers = InThread()  # type: ignore[assignment]
    key = ctx.settings.producer_key(PRODUCER_ID)
    assert key is not None
    hdrs = headers(body, 0)
    profiler = cProfile.Profile()
    meter = Meter(ctx.settings.database_url)
    cpu, wall = time.process_time(), time.perf_counter()
    profiler.enable()
    verifier = StreamingVerifier(
        hdrs["X-Signature"], key.secrets, "POST", "/v1/batches", int(time.time()), 300
    )
    ingest = Ingest(ctx.settings, key, MEDIA[0])
    for part in parts(body):
        verifier.update(part)
        ingest.feed(part)
    verifier.verify()
    batch = ingest.finish()
    submit(ctx, key, batch, hdrs["Idempotency-Key"])
    profiler.disable()
    meter.report(0, lines, time.perf_counter() - wall, time.process_time() - cpu)
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(30)
    stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=None, help="default 3 (--x12: 1)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--uvicorn", action="store_true")
    mode.add_argument("--profile", action="store_true")
    mode.add_argument("--x12", action="store_true", help="an X12 file of 210s, to an API process")
    parser.add_argument("--invoices", type=int, default=100_000, help="with --x12")
    parser.add_argument(
        "--json", action="store_true", help="the documents as one JSON body, not NDJSON"
    )
    parser.add_argument(
        "--map-processes",
        type=int,
        default=None,
        help="with --x12: the API's SETTLEQ_X12_MAP_PROCESSES (default: its own default)",
    )
    args = parser.parse_args()
    if args.x12:
        from bench import accept_x12

        accept_x12.main(args.invoices, args.runs or 1, args.map_processes)
        return
    args.runs = args.runs or 3
    documents = generate(args.lines, 50).documents
    lines = sum(len(d["lines"]) for d in documents)
    if args.json:
        MEDIA[0] = JSON
        body = json.dumps(
            {"kind": "promo_accrual", "documents": documents}, separators=(",", ":")
        ).encode()
    else:
        body = ndjson(documents)
    del documents
    print(f"{lines} lines, {len(body) / 1e6:.1f} MB {'JSON' if args.json else 'NDJSON'}")
    with isolated_env("accept") as env:
        if args.uvicorn:
            over_socket(env, body, lines, args.runs)
            return
        app = create_app(env.settings())

        async def run() -> None:
            async with app.router.lifespan_context(app):
                if args.profile:
                    profiled(app.state.ctx, body, lines)
                else:
                    await over_http(app, body, lines, args.runs)

        asyncio.run(run())


if __name__ == "__main__":
    main()
