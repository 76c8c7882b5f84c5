"""Per-stage cost of the worker tiers, in process, on the real services.

Stores a deterministic promo_accrual job (default 50,000 lines in 5,000-line
chunks), then runs the fast path's checks and the settle stage over every
chunk (which publishes each unit's events at its commit), then the relay
sweeping every outcome event again as it would after a broker outage,
printing CPU µs per line (per event for the relay) of this process and of
PostgreSQL, Redis and RabbitMQ, and (with ``--profile``) the top functions by
cumulative time. Used to find and check the top costs named in the
performance notes.

    python -m bench.stages [--lines 50000] [--profile settle|validate|relay]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, func, select

from bench.run import service_cpu
from services.relay.relay import Relay
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import make_context
from shared.adapters.db import tables
from shared.adapters.db.tables import OUTCOME, PUBLISHED_TYPES
from shared.config.settings import Settings
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import isolated_env
from tests.support.workload import generate


def measure(
    name: str, lines: int, run: Callable[[], None], profile: bool, unit: str = "line"
) -> None:
    services_before = service_cpu()
    cpu, wall = time.process_time(), time.perf_counter()
    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    run()
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    services = {k: v - services_before[k] for k, v in service_cpu().items()}
    per = 1e6 / lines
    print(
        f"{name:9} wall {wall * per:6.1f} µs/{unit:5} CPU: worker {cpu * per:6.1f}"
        f"  postgres {services['postgres'] * per:6.1f}  redis {services['redis'] * per:5.1f}"
        f"  rabbitmq {services['rabbitmq'] * per:5.1f}"
    )
    if profiler:
        stats = pstats.Stats(profiler)
        if name == "settle":
            print(stage_table(stats, cpu, lines))
        order = os.environ.get("PROFILE_SORT", "cumulative")  # or tottime
        stats.sort_stats(order).print_stats(35)


# The settle stage's parts, by the function that does each (file, name): nested
# ones are parts of the one above them. The floor does the first four in 3-4 µs
# a line (bench.floor; its process's whole CPU).
SETTLE_STAGES = (
    ("decode: the stored chunk, its Decimals", "decoding.py", "decode"),
    ("plan: every line's keys and settlement", "settlement.py", "plan_chunk"),
    ("  keys: two SHA-256 a line", "promo_accrual.py", "lines"),
    ("  settle: Decimal", "promo_accrual.py", "settle"),
    ("claims (Redis)", "leases.py", "claim"),
    ("commit: the transaction", "writer.py", "commit"),
    ("  probes, ids, COPY text, COPY", "postgres.py", "settle_by_copy"),
    ("    COPY text and the rows written", "postgres.py", "_ledger_text"),
    ("  outcome rows", "outcomes.py", "settled_outcomes"),
    ("  ranges", "ranges.py", "record"),
    ("  outbox row", "writer.py", "write_outbox"),
    ("publish: events, messages, confirms, mark", "publisher.py", "publish"),
    ("  events", "events.py", "unit_events"),
    ("  messages", "events.py", "unit_messages"),
)


def stage_table(stats: pstats.Stats, cpu_s: float, lines: int) -> str:
    """Each stage's share of the profiled settle, as core-µs a line of the
    worker's CPU under the profile (about 1.5 times its CPU without: compare
    the shares, or scale by the settle line of an unprofiled run). Waits on a
    server count as the profile's time, not as CPU: a stage that waits
    (commit, publish) reads high."""
    raw: dict[tuple[str, int, str], Any] = stats.stats  # type: ignore[attr-defined]
    total = max(cumulative for (_, _, _, cumulative, _) in raw.values())
    out = [f"{'stage':46} µs a line (profiled)  share of the profile"]
    for label, filename, function in SETTLE_STAGES:
        spent = sum(
            entry[3]
            for (path, _, name), entry in raw.items()
            if name == function and path.endswith("/" + filename)
        )
        share = spent / total
        out.append(f"{label:46} {share * cpu_s / lines * 1e6:8.2f}  {share:8.1%}")
    return "\n".join(out)


def drain(settings: Settings, engine: Engine) -> None:
    """Run the relay until every outcome event is published."""
    stop = threading.Event()
    outbox = tables.outbox

    def watch() -> None:
        with engine.connect() as conn:
            while not stop.wait(0.02):
                waiting = conn.execute(
                    select(func.count())
                    .select_from(outbox)
                    .where(outbox.c.published_at.is_(None), outbox.c.type.in_(PUBLISHED_TYPES))
                ).scalar()
                conn.rollback()
                if not waiting:
                    stop.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    Relay(settings, engine).run(stop)
    watcher.join()


def ledger_rows(engine: Engine) -> int:
    """The outcome events waiting: one per ledger row (the database is the bench's own)."""
    with engine.connect() as conn:
        return int(
            conn.execute(select(func.count()).select_from(tables.ledger_entries)).scalar_one()
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--profile", choices=("settle", "validate", "relay"), default=None)
    args = parser.parse_args()
    generated = generate(args.lines, 50)
    with isolated_env("stages") as env:
        settings = env.settings(max_chunk_documents=250, relay_grace_s=0)
        broker = build_broker(settings)
        ctx = make_context(settings, broker)
        try:
            vendors = sorted({d["partition_key"] for d in generated.documents})
            publish_promo_contracts(ctx.engine, vendors)
            _, messages = store_job(ctx.engine, settings, ctx.internal_key, generated.documents)
            print(f"{args.lines} lines in {len(messages)} chunks")

            def validate() -> None:
                for message in messages:
                    stages.validate_chunk(ctx, message, 1)

            def settle() -> None:
                for message in messages:
                    stages.settle_chunk(ctx, message, 1)

            measure("validate", args.lines, validate, args.profile == "validate")
            measure("settle", args.lines, settle, args.profile == "settle")
            events = ledger_rows(ctx.engine)
            print(
                f"{events} outcome events, at most {settings.event_batch_max} a message,"
                " published at commit; marked unpublished again for the relay's sweep"
            )
            with ctx.engine.begin() as conn:
                # Outcome rows only: a job's webhook events are the fan-out's,
                # which the relay never marks published.
                conn.execute(
                    tables.outbox.update()
                    .where(tables.outbox.c.type == OUTCOME)
                    .values(published_at=None)
                )
            measure(
                "relay",
                events,
                lambda: drain(settings, ctx.engine),
                args.profile == "relay",
                unit="event",
            )
        finally:
            ctx.engine.dispose()
            broker.close()


if __name__ == "__main__":
    main()
