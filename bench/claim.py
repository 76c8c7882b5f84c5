"""One measured claim of ``bench.run``: POST it, wait for its job and its outcome
events, read every process's CPU and peak RSS, and verify its ledger rows exactly."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx
import redis
from sqlalchemy import func, select, text

from bench.procstats import machine_cpu, process_stats, service_cpu
from services.commands.client import Client
from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.support.infra import REDIS_URL, ServiceEnv
from tests.support.stack import Stack
from tests.support.workload import Expectation


@dataclass
class Measured:
    """What one claim took, from its POST."""

    lines: int
    accept_s: float = 0.0
    e2e_s: float = 0.0  # POST → job completed
    events_s: float = 0.0  # POST → its last outcome event published
    relay_cpu: float = 0.0  # the relay's CPU until then
    events: int = 0
    # Per process: (peak RSS so far in MiB, CPU seconds of this claim, POST → completed).
    stats: dict[str, tuple[float, float]] = field(default_factory=dict)
    services: dict[str, float] = field(default_factory=dict)  # CPU seconds, likewise
    # Per process: peak RSS so far in MiB once the claim is over (its events published
    # too: the relay's work on a claim goes on after the job completed).
    peak_after: dict[str, float] = field(default_factory=dict)
    busy: float = 0.0  # the machine's busy and iowait CPU seconds, likewise
    iowait: float = 0.0
    latencies: list[float] = field(default_factory=list)
    ok: bool = False
    close_s: float | None = None  # a period's close halfway (--close-at): its answer's time

    @property
    def rate(self) -> float:
        return self.lines / self.e2e_s


def small_batches(stack: Stack, count: int, stop: threading.Event) -> list[float]:
    """Send 10-line batches from another vendor during the big run, one after
    another with a pause of 0.1 s (so that 20 fit in a run of a few seconds);
    their latencies."""
    client = stack.producer()
    latencies = []
    for n in range(count):
        if stop.wait(0.1):
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


def run_claim(
    stack: Stack,
    env: ServiceEnv,
    body: bytes,
    expect: Expectation,
    lines: int,
    *,
    small: int,
    flush_redis_at: float | None,
    close_at: float | None = None,
) -> Measured:
    """POST ``body`` (``lines`` lines, expected to settle as ``expect``) and measure it."""
    m = Measured(lines)
    producer = stack.producer()
    stop = threading.Event()
    sender = threading.Thread(target=lambda: m.latencies.extend(small_batches(stack, small, stop)))
    busy0, wait0 = machine_cpu()
    services0 = service_cpu()
    # Start-up work (imports, connections) is not the batch's: CPU counts from here.
    started_cpu = {name: process_stats(p.pid)[1] for name, p in stack.processes.items()}
    t0 = time.monotonic()
    response = httpx.post(
        f"{stack.url}/v1/batches",
        content=body,
        headers={**_signed(body), "Content-Type": "application/x-ndjson"},
        timeout=600,
    )
    m.accept_s = time.monotonic() - t0
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    sender.start()
    closer = Closer(stack, close_at)
    job = wait_completed(producer, job_id, flush_redis_at, closer)
    m.e2e_s = time.monotonic() - t0
    busy1, wait1 = machine_cpu()
    m.busy, m.iowait = busy1 - busy0, wait1 - wait0
    m.services = {k: v - services0[k] for k, v in service_cpu().items()}
    m.stats = {
        name: (rss, cpu - started_cpu.get(name, 0.0))
        for name, (rss, cpu) in (
            (name, process_stats(p.pid)) for name, p in stack.processes.items()
        )
    }
    m.events_s = wait_for_events(env.database_url, t0)
    # The relay's CPU until its last event, not just until the job completed.
    m.relay_cpu = process_stats(stack.processes["relay"].pid)[1] - started_cpu["relay"]
    m.events = ledger_rows(env.database_url, job_id)
    stop.set()
    sender.join()
    m.ok = verify(env.database_url, job, expect, lines)
    if closer.period is not None:
        m.close_s = closer.join()
        m.ok = verify_periods(env.database_url, stack, job_id, closer.period) and m.ok
    m.peak_after = {name: process_stats(p.pid)[0] for name, p in stack.processes.items()}
    return m


class Closer:
    """Closes the open period once a job's progress reaches ``at`` (``--close-at``),
    on a thread of its own: the close waits for the units committing then, and
    the job's progress is read on meanwhile."""

    def __init__(self, stack: Stack, at: float | None) -> None:
        self.stack, self.at = stack, at
        self.period: str | None = None
        self.seconds = 0.0
        self.thread: threading.Thread | None = None

    def progress(self, progress: float) -> None:
        if self.at is None or self.thread is not None or progress < self.at:
            return
        operator = self.stack.operator()
        [current] = [p for p in operator.bearer("GET", "/v1/periods").json()["items"][:1]]
        self.period = current["name"]
        body = {"period": self.period, "next": f"{self.period}-after", "note": "bench"}

        def close() -> None:
            started = time.monotonic()
            answer = operator.bearer("POST", "/admin/periods/close", body)
            self.seconds = time.monotonic() - started
            assert answer.status_code == 200, answer.text

        self.thread = threading.Thread(target=close)
        self.thread.start()
        print(f"closing period {self.period} at progress {progress}")

    def join(self) -> float:
        assert self.thread is not None
        self.thread.join()
        return self.seconds


def wait_completed(
    producer: Client, job_id: str, flush_redis_at: float | None, closer: Closer | None = None
) -> dict[str, Any]:
    """Poll the job until it completes, flushing Redis once at ``flush_redis_at``
    progress, and closing the period at the closer's."""
    flushed = False
    while True:
        job: dict[str, Any] = producer.job(job_id)
        if closer is not None:
            closer.progress(job["progress"])
        if flush_redis_at is not None and not flushed and job["progress"] >= flush_redis_at:
            redis.Redis.from_url(REDIS_URL).flushdb()
            flushed = True
            print(f"flushed Redis at progress {job['progress']}")
        if job["state"] == "completed":
            return job
        time.sleep(0.05)


def _signed(body: bytes) -> dict[str, str]:
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


# Each of the job's rows against the whole ledger: how many posted or disputed
# rows hold its identity (counted to 2: one is right, more is a line settled
# twice). Each lookup is a probe of the identity's unique index, whose key
# expression (the key's bytes: types.identity_key) and predicate the query
# repeats, so a ledger filled with history costs this check no scan of
# it; and history's ``resolved`` rows, which repeat their dispute's identity by
# design, are no second row.
_WORST_IDENTITY = text(
    """
    SELECT max(c.n) FROM ledger_entries j
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (
            SELECT 1 FROM ledger_entries i
            WHERE decode(i.reconciliation_key, 'hex') = decode(j.reconciliation_key, 'hex')
              AND i.contract_version = j.contract_version
              AND i.outcome IN ('posted', 'disputed')
            LIMIT 2
        ) found
    ) c
    WHERE j.job_id = :job_id
    """
)


def verify(url: str, job: dict[str, Any], expect: Expectation, total: int) -> bool:
    """The job's counters and its own ledger rows against the generator's expectation."""
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
        worst = conn.execute(_WORST_IDENTITY, {"job_id": job["job_id"]}).scalar()
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


def verify_periods(url: str, stack: Stack, job_id: str, closed: str) -> bool:
    """After a close halfway: every row of the job booked in one of the two
    periods, and both journals adding up to the ledger: each entry the sum of
    its (period, kind, partition)'s deltas, over every row."""
    ledger = tables.ledger_entries
    engine = make_engine(url)
    with engine.connect() as conn:
        booked = dict(
            conn.execute(
                select(ledger.c.period, func.count())
                .where(ledger.c.job_id == job_id)
                .group_by(ledger.c.period)
            ).all()
        )
        sums = {
            (p, k, pk): (n, d)
            for p, k, pk, n, d in conn.execute(
                select(
                    ledger.c.period,
                    ledger.c.kind,
                    ledger.c.partition_key,
                    func.count(),
                    func.sum(ledger.c.delta),
                ).group_by(ledger.c.period, ledger.c.kind, ledger.c.partition_key)
            )
        }
    engine.dispose()
    viewer = stack.viewer()
    entries = {}
    for period in (closed, f"{closed}-after"):
        journal = viewer.bearer("GET", f"/v1/periods/{period}/journal").json()
        for e in journal["entries"]:
            entries[(period, e["kind"], e["partition_key"])] = (
                e["rows"],
                Decimal(e["lines"][0]["debit"]),
            )
    checks = {
        # Both, unless the units left at the close were all committing then.
        "rows booked in the two periods": set(booked) <= {closed, f"{closed}-after"},
        "journals add up to the ledger": entries
        == {key: (n, abs(d)) for key, (n, d) in sums.items()},
    }
    for name, passed in checks.items():
        print(f"  {'ok ' if passed else 'BAD'} {name} {booked if 'rows' in name else ''}")
    return all(checks.values())
