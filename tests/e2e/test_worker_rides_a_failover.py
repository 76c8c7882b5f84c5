"""A worker and the API through a failover, on one URL naming both hosts
(docs/operations.md#when-the-primary-is-gone): a settle inside its transaction
when the primary dies waits for a primary without spending its attempts, and
settles once the standby is promoted, with nothing restarted; the API answers
503 while no host takes writes and 202 again once one does.

A synchronous streaming standby of the test's own (``initdb``,
``pg_basebackup``), promoted by hand: the cluster suite's
tests/cluster/test_failover.py does the same under load, promoted by
pg_auto_failover.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.support.booking_lock import BookingLock
from tests.support.chaos_checks import DOUBLED, wait_for
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    ServiceEnv,
    check_services,
    delete_queues,
    delete_redis_keys,
    migrate,
    new_prefix,
)
from tests.support.replica import Pair, primary_and_standby
from tests.support.stack import Stack, log_events

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MAX_ATTEMPTS = 2
CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}


@pytest.fixture
def pair_and_stack(tmp_path: Path) -> Iterator[tuple[Pair, Stack]]:
    check_services()
    prefix = new_prefix()
    with primary_and_standby(synchronous=True) as pair:
        migrate(pair.primary_url)
        env = ServiceEnv(database_url=pair.both_url, queue_prefix=prefix)
        stack = Stack(env, tmp_path, max_attempts=MAX_ATTEMPTS)
        try:
            yield pair, stack
        finally:
            stack.stop()
            delete_queues(prefix)
            delete_redis_keys(prefix)


def submission(vendor: str, lines: int) -> bytes:
    doc = promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, lines + 1)])
    return json.dumps({"kind": "promo_accrual", "documents": [doc]}).encode()


def outage_waits(stack: Stack, worker: str) -> int:
    return sum(
        1
        for e in log_events(stack.log(worker, tail=None))
        if e.get("status") == "retry" and e.get("reason") == "database_unavailable"
    )


def test_a_settle_cut_by_the_primary_dying_settles_on_the_promoted_standby(
    pair_and_stack: tuple[Pair, Stack],
) -> None:
    """Before, each failed connect was an attempt: the unit was dead-lettered
    ``retries_exhausted`` within seconds of the primary's death, long before
    any promotion."""
    pair, stack = pair_and_stack
    stack.start_api()
    stack.start_worker("fast_path", name="fast")
    stack.start_worker("compute_heavy", name="heavy")
    vendor = uid("FAIL-")
    put = stack.operator().bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
    assert put.status_code == 201, put.text
    producer = stack.producer()

    lock = BookingLock(pair.primary_url)
    try:
        lock.hold()
        accepted = producer.submit(submission(vendor, 3))
        assert accepted.status_code == 202, accepted.text
        first = accepted.json()["job_id"]
        lock.wait_for("heavy", count=1, timeout=120)  # inside its transaction
        pair.stop_primary()  # its host gone: the settle's connection with it
        died = time.monotonic()
    finally:
        with contextlib.suppress(Exception):
            lock.close()

    # No host takes writes: the front door says so, and accepts nothing.
    refused = producer.submit(submission(vendor, 2))
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "database_unavailable", refused.text
    # The settle waits for a primary past its attempts, without spending them.
    wait_for(lambda: outage_waits(stack, "heavy"), lambda n: n > MAX_ATTEMPTS, 120)

    pair.promote_standby()
    promoted = time.monotonic()
    again = wait_for(
        lambda: producer.submit(submission(vendor, 2)), lambda r: r.status_code == 202, 60
    )
    accepted_at = time.monotonic()
    jobs = [producer.wait(job_id, timeout=120) for job_id in (first, again.json()["job_id"])]
    settled_at = time.monotonic()
    print(
        f"\nfailover by hand: primary dead {promoted - died:.1f} s; after the promotion,"
        f" the first 202 in {accepted_at - promoted:.1f} s, both jobs settled in"
        f" {settled_at - promoted:.1f} s"
    )
    assert [j["outcomes"] for j in jobs] == [
        {"posted": 3, "disputed": 0, "duplicate": 0, "dead_lettered": 0},
        {"posted": 2, "disputed": 0, "duplicate": 0, "dead_lettered": 0},
    ], jobs
    engine = make_engine(pair.standby_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(DOUBLED).scalar_one() == 0
            rows = conn.execute(select(func.count()).select_from(tables.ledger_entries))
            assert rows.scalar_one() == 5
            letters = conn.execute(select(func.count()).select_from(tables.dead_letters))
            assert letters.scalar_one() == 0
    finally:
        engine.dispose()
    for name in ("api", "fast", "heavy"):
        assert stack.processes[name].poll() is None, f"{name} exited:\n{stack.log(name)}"
