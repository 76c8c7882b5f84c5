"""A worker whose database is not there yet when it starts (a supervisor
started it, or the database came up late) waits for it, then settles, with
no traceback (services/worker/runner.py, shared/adapters/db/migrate.py's
``InternalKey``): it consumes nothing meanwhile, so no message spends its
attempts on a database that cannot answer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    PG_ADMIN,
    ServiceEnv,
    check_services,
    create_database,
    delete_queues,
    delete_redis_keys,
    drop_database,
    migrate,
    new_prefix,
)
from tests.support.stack import START_CAP_S, Stack

pytestmark = [pytest.mark.e2e, pytest.mark.regression]


@pytest.fixture
def late(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    """A stack whose database is named but not created: the test creates it."""
    check_services()
    prefix = new_prefix()
    name = f"settleq_test_late_{prefix[1:]}"
    url = f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"
    stack = Stack(ServiceEnv(database_url=url, queue_prefix=prefix), tmp_path)
    try:
        yield stack, name
    finally:
        stack.stop()
        drop_database(name)
        delete_queues(prefix)
        delete_redis_keys(prefix)


def test_a_worker_started_before_its_database_waits_for_it_then_settles(
    late: tuple[Stack, str],
) -> None:
    """Issue 52 item 13: a worker that met a database fault in its start-up
    exited with a traceback (a supervisor restarted it, with backoff)."""
    stack, name = late
    worker = stack.start_worker("fast_path,compute_heavy", name="worker", checked=True)
    deadline = time.monotonic() + START_CAP_S
    while "waiting for it" not in stack.log("worker"):
        assert worker.poll() is None, f"the worker exited:\n{stack.log('worker')}"
        assert time.monotonic() < deadline, f"no wait said:\n{stack.log('worker')}"
        time.sleep(0.1)
    # The database comes: created, then migrated (the worker may read it in
    # between, unmigrated, and goes on waiting).
    migrate(create_database(name))
    stack.start_api()
    vendor = uid("LATE-")
    contract = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
    put = stack.operator().bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", contract)
    assert put.status_code == 201, put.text
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "40", "6.00")])
    producer = stack.producer()
    body = json.dumps({"kind": "promo_accrual", "documents": [doc]}).encode()
    accepted = producer.submit(body)
    assert accepted.status_code == 202, accepted.text
    job = producer.wait(accepted.json()["job_id"], timeout=START_CAP_S)
    assert job["state"] == "completed", (job, stack.log("worker"))
    assert job["outcomes"] == {"posted": 1, "disputed": 1, "duplicate": 0, "dead_lettered": 0}
    assert worker.poll() is None  # the same process, never restarted
    stack.stop_one("worker")
    log = stack.log("worker", tail=None)
    assert "the database is ready" in log
    assert "Traceback" not in log, log
