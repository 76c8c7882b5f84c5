"""Failures with the real workers (issue 3): retried with growing delays,
exhausted into dead letters, structural errors dead-lettered at once, the
repair story over HTTP, and a graceful SIGTERM.

Transient failures and the mid-chunk stop come from outside the worker: the
test holds the booking lock, as a period close does, so that a settle waits
for it inside its transaction, claims leased; there PostgreSQL ends the
settle's connection (an attempt failed transiently) or the worker is sent
SIGTERM (tests/support/booking_lock.py)."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
import redis
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from shared.adapters.db.migrate import load_internal_key
from shared.adapters.rabbitmq.broker import enqueue, make_broker
from shared.domain.pipeline.messages import FAST_PATH, VALIDATE_ACTOR
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_worker_crash import leased_claims
from tests.support.booking_lock import BookingLock
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.infra import REDIS_URL, ServiceEnv
from tests.support.ledger import chunk_results, dead_letters
from tests.support.stack import Stack, log_events

CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
SETTINGS = {"backoff_base_ms": 200, "backoff_max_ms": 5000, "claim_lease_ms": 2000}


@pytest.fixture(scope="module")
def base(stack_env: ServiceEnv) -> Iterator[Stack]:
    """API and fast_path worker; each test brings its own compute_heavy worker."""
    logs = ARTIFACTS / "logs" / "test_failure_handling"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs, **SETTINGS)
    stack.start_api()
    stack.start_worker("fast_path")
    try:
        yield stack
    finally:
        stack.stop()


def vendor_with_contract(stack: Stack) -> str:
    vendor = uid("F-")
    path = f"/v1/contracts/promo_accrual/{vendor}/1"
    assert stack.operator().bearer("PUT", path, CONTRACT).status_code == 201
    return vendor


def submit(stack: Stack, docs: list[dict[str, Any]]) -> str:
    body = json.dumps({"kind": "promo_accrual", "documents": docs}).encode()
    response = stack.producer().submit(body)
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def fail_attempts(
    lock: BookingLock, worker: str, until: Callable[[list[float]], bool]
) -> list[float]:
    """Fail each settle attempt of ``worker`` (its connection ended while it waits
    for the held booking lock) until ``until(failed)``; when each failed."""
    failed: list[float] = []
    while not until(failed):
        for pid in lock.waiting(worker):
            lock.terminate(pid)
            failed.append(time.monotonic())
        time.sleep(0.02)
    return failed


def scheduled_delays_ms(log: str) -> list[int]:
    """The backoffs Dramatiq's Retries middleware chose, in order."""
    return [int(ms) for ms in re.findall(r"Retrying message '[^']+' in (\d+) milliseconds", log)]


def test_transient_fault_is_retried_with_growing_delays_then_posts_once(
    base: Stack, engine: Engine, stack_env: ServiceEnv
) -> None:
    worker = "heavy-flaky"
    base.start_worker("compute_heavy", name=worker, max_attempts=5)
    lock = BookingLock(stack_env.database_url)
    try:
        vendor = vendor_with_contract(base)
        with lock.held():
            job_id = submit(
                base, [promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 6)])]
            )
            # Attempts 1-3 lose their database connection mid-transaction.
            times = fail_attempts(lock, worker, until=lambda failed: len(failed) >= 3)
        job = base.producer().wait(job_id, timeout=60)  # attempt 4 posts
    finally:
        lock.close()
        base.stop_one(worker)
    assert job["outcomes"] == {"posted": 5, "disputed": 0, "duplicate": 0, "dead_lettered": 0}
    log = base.log(worker, tail=None)
    # The worker saw each as its database connection lost, a transient failure.
    retried = [e["reason"] for e in log_events(log) if e.get("status") == "retry"]
    assert retried == 3 * ["OperationalError"], retried
    # Backoff is base * 2**n with jitter in [1, 2): 200-400 ms, 400-800 ms, 800-1600 ms.
    scheduled = scheduled_delays_ms(log)
    assert len(scheduled) == 3 and scheduled == sorted(scheduled), scheduled
    assert 200 <= scheduled[0] <= 400 and 400 <= scheduled[1] <= 800 and 800 <= scheduled[2] <= 1600
    waited = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    assert all(w >= d for w, d in zip(waited, scheduled, strict=False)), (waited, scheduled)
    with engine.connect() as conn:
        rows = conn.execute(
            select(func.count()).where(tables.ledger_entries.c.job_id == job_id)
        ).scalar_one()
    assert rows == 5


def test_always_transient_fault_ends_as_retries_exhausted(
    base: Stack, engine: Engine, stack_env: ServiceEnv
) -> None:
    worker = "heavy-broken"
    base.start_worker("compute_heavy", name=worker, max_attempts=3)
    lock = BookingLock(stack_env.database_url)
    try:
        vendor = vendor_with_contract(base)
        docs = [promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 4)])]
        producer = base.producer()
        with lock.held():
            job_id = submit(base, docs)
            # Every attempt fails; the last one's dead letter books no row, so
            # it needs no booking lock.
            failed = fail_attempts(
                lock, worker, until=lambda _: producer.job(job_id)["state"] == "completed"
            )
        job = producer.wait(job_id, timeout=60)
    finally:
        lock.close()
        base.stop_one(worker)
    assert job["outcomes"] == {"posted": 0, "disputed": 0, "duplicate": 0, "dead_lettered": 3}
    [letter] = dead_letters(engine, job_id)
    assert (letter.reason, letter.error_class, letter.attempts) == (
        "retries_exhausted",
        "TransientError",
        3,
    )
    assert len(failed) == 3


def test_structural_error_is_dead_lettered_on_the_first_attempt(
    base: Stack, engine: Engine, stack_env: ServiceEnv
) -> None:
    worker = "heavy-structural"
    base.start_worker("compute_heavy", name=worker)
    try:
        vendor = vendor_with_contract(base)
        settings = stack_env.settings()
        key = load_internal_key(engine, None)
        job_id, [message] = store_job(
            engine, settings, key, [promo_doc(vendor, [promo_line(1, "8", "1.00")])]
        )
        tampered = {**message, "payload_sha256": "0" * 64}
        broker = make_broker(settings)
        enqueue(broker, settings.queue_name(FAST_PATH), VALIDATE_ACTOR, tampered)
        broker.close()
        job = base.producer().wait(job_id, timeout=30)
    finally:
        base.stop_one(worker)
    assert job["outcomes"]["dead_lettered"] == 1
    [letter] = dead_letters(engine, job_id)
    assert (letter.reason, letter.error_class, letter.attempts) == (
        "signature_mismatch",
        "StructuralError",
        1,
    )


def test_repair_story_unknown_contract_then_bulk_requeue(base: Stack, engine: Engine) -> None:
    worker = "heavy-repair"
    base.start_worker("compute_heavy", name=worker)
    try:
        vendor = uid("REPAIR-")  # its contract is not published yet
        docs = [
            promo_doc(vendor, [promo_line(n, str(8 * n), f"{n}.00") for n in range(1, 5)])
            for _ in range(5)
        ]
        producer, operator = base.producer(), base.operator()
        job_id = submit(base, docs)
        job = producer.wait(job_id, timeout=30)
        assert job["outcomes"]["dead_lettered"] == 20
        letters = operator.bearer(
            "GET", f"/admin/dead-letters?reason=unknown_contract_version&partition_key={vendor}"
        ).json()["items"]
        assert len(letters) == 5 and {d["lines"] for d in letters} == {4}

        path = f"/v1/contracts/promo_accrual/{vendor}/1"
        assert operator.bearer("PUT", path, CONTRACT).status_code == 201
        body = {"reason": "unknown_contract_version", "partition_key": vendor, "limit": 100}
        first = operator.bearer("POST", "/admin/dead-letters/requeue", body)
        second = operator.bearer("POST", "/admin/dead-letters/requeue", body)
        nothing_skipped = {"skipped": 0, "would_fail_again": {}}
        assert (first.json(), second.json()) == (
            {"requeued": 5, **nothing_skipped},
            {"requeued": 0, **nothing_skipped},
        )

        deadline = time.monotonic() + 30
        while (job := producer.job(job_id))["outcomes"][
            "dead_lettered"
        ] and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        base.stop_one(worker)
    assert job["outcomes"] == {"posted": 20, "disputed": 0, "duplicate": 0, "dead_lettered": 0}
    assert sum(job["outcomes"].values()) == job["lines"] == 20
    # Each document: 8n units at 0.125 = n, for n = 1..4: 10.00; five documents.
    assert Decimal(job["amounts"]["posted"]) == Decimal("50.00")
    with engine.connect() as conn:
        rows = conn.execute(
            select(
                func.count(), func.count(func.distinct(tables.ledger_entries.c.reconciliation_key))
            ).where(tables.ledger_entries.c.job_id == job_id)
        ).one()
    assert tuple(rows) == (20, 20)
    statuses = {
        d["status"]
        for d in base.operator()
        .bearer("GET", f"/admin/dead-letters?partition_key={vendor}")
        .json()["items"]
    }
    assert statuses == {"requeued"}


def test_sigterm_mid_chunk_finishes_it_and_loses_nothing(
    base: Stack, engine: Engine, stack_env: ServiceEnv
) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    worker = "heavy-terminated"
    process = base.start_worker("compute_heavy", name=worker)
    lock = BookingLock(stack_env.database_url)
    try:
        vendor = vendor_with_contract(base)
        with lock.held():
            job_id = submit(
                base, [promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 11)])]
            )
            lock.wait_for(worker, timeout=30)
            assert leased_claims(client, stack_env.queue_prefix)
            # SIGTERM while the chunk is between claim and commit: the worker
            # waits for it rather than exit.
            process.send_signal(signal.SIGTERM)
            time.sleep(1)
            assert process.poll() is None, base.log(worker)
        base.stop_one(worker)
        assert process.returncode == 0
        assert len(chunk_results(engine, job_id)) == 1  # it finished the in-flight chunk
        job = base.producer().job(job_id)
    finally:
        lock.close()
        client.close()
    assert job["state"] == "completed"
    assert job["outcomes"] == {"posted": 10, "disputed": 0, "duplicate": 0, "dead_lettered": 0}


def test_dlq_command_line_lists_shows_requeues_and_discards(base: Stack, engine: Engine) -> None:
    import subprocess
    import sys

    from tests.support.infra import OPERATOR_TOKEN
    from tests.support.stack import ROOT

    worker = "heavy-cli"
    base.start_worker("compute_heavy", name=worker)
    try:
        vendor = vendor_with_contract(base)
        docs = [promo_doc(vendor, [promo_line(1, "8", "1.00", tier="TX")]) for _ in range(2)]
        job_id = submit(base, docs)
        base.producer().wait(job_id, timeout=30)
    finally:
        base.stop_one(worker)

    def dlq(*args: str) -> str:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "services.commands.cli",
                "dlq",
                *args,
                "--url",
                base.url,
                "--token",
                OPERATOR_TOKEN,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    listed = dlq("list", "--job-id", job_id)
    assert listed.count("unknown_promo_tier") == 2
    first, second = (d.id for d in dead_letters(engine, job_id))
    assert f'"id": {first}' in dlq("show", str(first))
    assert "discarded" in dlq("discard", str(first), "--note", "claim withdrawn")
    # Its pinned contract has no tier TX: a requeue could only fail again (issue 42 item 13).
    requeued = dlq("requeue", "--job-id", job_id)
    assert "requeued 0" in requeued
    assert "skipped 1 that would be dead-lettered again: unknown_promo_tier 1" in requeued
    assert {d.status for d in dead_letters(engine, job_id)} == {"discarded", "dead"}
    assert second
