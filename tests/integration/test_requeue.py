"""Requeueing dead letters over HTTP in process (docs/api.md#dead-letters-and-the-audit-log):
in batches, each letter once, and never a requeue that can only fail again
(issue 42 items 12 and 13), on each ledger backend."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from services.api.app import create_app
from services.api.dead_letters import requeue as requeue_module
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.jobs.queries import job_status
from shared.adapters.rabbitmq.broker import PartlyEnqueued
from shared.domain.synthetic import promo_contract
from tests.support.factories import (
    promo_doc,
    promo_line,
    publish_promo_contracts,
    store_job,
    uid,
)
from tests.support.infra import BROKER_URL, OPERATOR_TOKEN, ServiceEnv, queue_depth
from tests.support.ledger import dead_letters, ledger_rows

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


def dead_documents(ctx: WorkerContext, vendor: str, documents: int, **line: Any) -> str:
    """A settled job of one-line documents of ``vendor``, each one dead-lettered
    (no contract of the vendor yet, or the line's ``tier`` unknown); its id."""
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00", **line)]) for _ in range(documents)]
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    assert len(dead_letters(ctx.engine, job_id)) == documents
    return job_id


class Statements:
    """Counts the SQL statements every engine of this process sends (an
    executemany is one)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *args: Any) -> None:
        self.count += 1

    def __enter__(self) -> Statements:
        event.listen(Engine, "before_cursor_execute", self)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "before_cursor_execute", self)


@pytest.mark.regression
def test_a_bulk_requeue_costs_statements_per_batch_not_per_letter(
    operator: Client, ctx: WorkerContext, backend_env: ServiceEnv
) -> None:
    """Issue 42 item 12: a bulk requeue ran a transaction and a publish per
    letter (74 letters/s: 10,000 did not finish within the CLI's 60 s). Now a
    batch is judged, marked and audited in a few statements and its messages
    go out together; bench/requeue.py measures the 10,000."""
    vendor = uid("RQB-")
    job_id = dead_documents(ctx, vendor, 120)
    publish_promo_contracts(ctx.engine, [vendor])
    depth = queue_depth(backend_env.queue_prefix, "fast_path")
    with Statements() as statements:
        answer = operator.bearer(
            "POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 10_000}
        )
    assert answer.status_code == 200
    # One batch: the ids, the letters, the contracts, the mark, the digests, the
    # audit, the next (empty) ids, and the connections' own; before, 3 or more each.
    assert statements.count <= 20, statements.count
    assert answer.json() == {"requeued": 120, "skipped": 0, "would_fail_again": {}}
    letters = dead_letters(ctx.engine, job_id)
    assert {(d.status, d.requeues) for d in letters} == {("requeued", 1)}
    assert queue_depth(backend_env.queue_prefix, "fast_path") == depth + 120
    audit = operator.bearer("GET", "/admin/audit?limit=500").json()["items"]
    requeued = [a for a in audit if a["details"].get("job_id") == job_id]
    assert sorted(a["target"] for a in requeued) == sorted(f"dead_letter:{d.id}" for d in letters)


@pytest.mark.regression
def test_a_bulk_requeue_the_broker_stops_logs_why_and_leaves_the_rest_dead(
    operator: Client,
    ctx: WorkerContext,
    backend_env: ServiceEnv,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 42 item 12: a bulk requeue stopped part-way without a log line. Now
    a batch is requeued whole or not at all: the one the broker failed in is
    rolled back (its letters stay dead, none is left marked without a
    message), the answer is 503 saying how many went, the log says why, and
    the messages of the failed batch the broker did take are dropped by the
    worker as stale."""
    vendor = uid("RQS-")
    job_id = dead_documents(ctx, vendor, 30)
    publish_promo_contracts(ctx.engine, [vendor])
    monkeypatch.setattr(requeue_module, "BATCH", 10)  # slices of 3, 3, 3 and 1
    real = requeue_module.enqueue_many
    calls = {"n": 0}
    lock = threading.Lock()

    def second_batch_fails(*args: Any) -> int:
        with lock:
            calls["n"] += 1
            fail = calls["n"] == 6  # the second batch's second slice
        if fail:
            raise PartlyEnqueued(0, pika.exceptions.AMQPConnectionError("gone"))
        return real(*args)

    monkeypatch.setattr(requeue_module, "enqueue_many", second_batch_fails)
    with caplog.at_level(logging.WARNING, logger="settleq.api"):
        answer = operator.bearer(
            "POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 100}
        )
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "broker_unavailable"
    assert error["details"] == [{"requeued": 10, "left_dead": 10}]
    assert any("requeue stopped" in r.getMessage() for r in caplog.records)
    letters = dead_letters(ctx.engine, job_id)
    went = {d.id for d in letters if (d.status, d.requeues) == ("requeued", 1)}
    stayed = {d.id for d in letters if (d.status, d.requeues) == ("dead", 0)}
    assert (len(went), len(stayed)) == (10, 20)
    # The first batch's ten messages, and the failed batch's that the broker took.
    messages = drain(backend_env.queue_prefix, job_id, went | stayed)
    assert {m["dead_letter_id"] for m in messages} - went <= stayed
    assert len(messages) > 10
    for message in messages:
        settle_chunk(ctx, message, 1)
    status = job_status(ctx.engine, job_id)
    assert status is not None
    assert (status.outcomes["posted"], status.outcomes["dead_lettered"]) == (10, 20)
    monkeypatch.undo()
    # What was left dead is requeued by asking again.
    again = operator.bearer("POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 100})
    assert again.json()["requeued"] == 20


def test_two_racing_bulk_requeues_requeue_each_letter_once(
    operator: Client, ctx: WorkerContext, backend_env: ServiceEnv
) -> None:
    vendor = uid("RQR-")
    job_id = dead_documents(ctx, vendor, 200)
    publish_promo_contracts(ctx.engine, [vendor])
    depth = queue_depth(backend_env.queue_prefix, "fast_path")
    answers: list[Any] = []

    def bulk() -> None:
        answers.append(
            operator.bearer(
                "POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 10_000}
            ).json()
        )

    threads = [threading.Thread(target=bulk) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(a["requeued"] for a in answers) == 200
    assert {(d.status, d.requeues) for d in dead_letters(ctx.engine, job_id)} == {("requeued", 1)}
    assert queue_depth(backend_env.queue_prefix, "fast_path") == depth + 200


@pytest.mark.regression
def test_a_requeue_at_a_still_unpublished_version_is_refused_naming_the_cause(
    operator: Client, ctx: WorkerContext, backend_env: ServiceEnv
) -> None:
    """Issue 42 item 13: a requeue of a document whose pinned contract version
    is still not published was accepted (``requeued 1``) and dead-lettered again."""
    vendor = uid("RQV-")
    job_id = dead_documents(ctx, vendor, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    depth = queue_depth(backend_env.queue_prefix, "fast_path")
    refused = operator.bearer("POST", f"/admin/dead-letters/{letter.id}/requeue")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "requeue_would_fail_again"
    assert "unknown_contract_version" in error["message"]
    assert [(d["reason"], d["lines"]) for d in error["details"]] == [
        ("unknown_contract_version", 1)
    ]
    # A later version does not help: the document is pinned to version 1.
    put_contract(ctx.engine, "promo_accrual", vendor, 2, promo_contract())
    assert operator.bearer("POST", f"/admin/dead-letters/{letter.id}/requeue").status_code == 409
    assert queue_depth(backend_env.queue_prefix, "fast_path") == depth
    [still] = dead_letters(ctx.engine, job_id)
    assert (still.status, still.requeues) == ("dead", 0)
    # Its version published, it is requeued.
    publish_promo_contracts(ctx.engine, [vendor])
    done = operator.bearer("POST", f"/admin/dead-letters/{letter.id}/requeue")
    assert done.status_code == 200 and done.json() == {"requeued": 1}


@pytest.mark.regression
def test_a_line_whose_pinned_contract_lacks_its_tier_is_not_requeued(
    operator: Client, ctx: WorkerContext
) -> None:
    """Issue 42 item 13: publishing the missing tier in a new version and
    requeueing reran the line at its pinned version: dead-lettered again."""
    vendor = uid("RQT-")
    publish_promo_contracts(ctx.engine, [vendor])
    job_id = dead_documents(ctx, vendor, 1, tier="T7")
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.line_ref) == ("unknown_promo_tier", "1")
    body = promo_contract()
    put_contract(
        ctx.engine,
        "promo_accrual",
        vendor,
        2,
        {**body, "tier_rates": {**body["tier_rates"], "T7": "0.5"}},
    )
    refused = operator.bearer("POST", f"/admin/dead-letters/{letter.id}/requeue")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "requeue_would_fail_again"
    assert [d["reason"] for d in refused.json()["error"]["details"]] == ["unknown_promo_tier"]
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.outcomes["dead_lettered"] == 1


@pytest.mark.regression
def test_a_bulk_requeue_skips_what_would_fail_again_and_says_why(
    operator: Client, ctx: WorkerContext, backend_env: ServiceEnv
) -> None:
    """Issue 42 item 13: the bulk requeue counted such letters as requeued."""
    fixed, unfixed = uid("RQF-"), uid("RQU-")
    jobs = [dead_documents(ctx, fixed, 3), dead_documents(ctx, unfixed, 2)]
    publish_promo_contracts(ctx.engine, [fixed])
    tiers = uid("RQX-")
    publish_promo_contracts(ctx.engine, [tiers])
    jobs.append(dead_documents(ctx, tiers, 1, tier="T9"))
    depth = queue_depth(backend_env.queue_prefix, "fast_path")
    answers = [
        operator.bearer("POST", "/admin/dead-letters/requeue", {"job_id": j, "limit": 10}).json()
        for j in jobs
    ]
    assert answers == [
        {"requeued": 3, "skipped": 0, "would_fail_again": {}},
        {"requeued": 0, "skipped": 2, "would_fail_again": {"unknown_contract_version": 2}},
        {"requeued": 0, "skipped": 1, "would_fail_again": {"unknown_promo_tier": 1}},
    ]
    assert queue_depth(backend_env.queue_prefix, "fast_path") == depth + 3
    assert {d.status for d in dead_letters(ctx.engine, jobs[1])} == {"dead"}


def drain(prefix: str, job_id: str, letter_ids: set[int]) -> list[dict[str, Any]]:
    """The requeue messages of ``letter_ids`` of ``job_id`` waiting on the
    fast_path queue, taken off it. By job too: dead letter ids are a database's,
    and another test's database (the other backend's) can leave its own on the
    queue under the same ids."""
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    found = []
    try:
        channel = connection.channel()
        while True:
            method, _, body = channel.basic_get(f"{prefix}.fast_path", auto_ack=True)
            if method is None:
                return found
            [message] = json.loads(body)["args"]
            if message.get("dead_letter_id") in letter_ids and message["job_id"] == job_id:
                found.append(message)
    finally:
        connection.close()


def test_bulk_requeued_letters_settle_once_and_move_the_counters(
    operator: Client, ctx: WorkerContext, backend_env: ServiceEnv
) -> None:
    vendor = uid("RQC-")
    job_id = dead_documents(ctx, vendor, 5)
    publish_promo_contracts(ctx.engine, [vendor])
    letters = {d.id for d in dead_letters(ctx.engine, job_id)}
    answer = operator.bearer("POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 10})
    assert answer.json()["requeued"] == 5
    messages = drain(backend_env.queue_prefix, job_id, letters)
    assert sorted(m["dead_letter_id"] for m in messages) == sorted(letters)
    for message in messages:
        settle_chunk(ctx, message, 1)
        assert settle_chunk(ctx, message, 2) is None  # a redelivery changes nothing
    status = job_status(ctx.engine, job_id)
    assert status is not None
    assert status.outcomes == {"posted": 5, "disputed": 0, "duplicate": 0, "dead_lettered": 0}
    assert len(ledger_rows(ctx.engine, job_id)) == 5
