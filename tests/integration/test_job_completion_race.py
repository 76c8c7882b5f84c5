"""A job's last two chunks committing at the same moment write its
``job.completed`` once (shared/adapters/db/webhooks/events.py::after_chunk),
on PostgreSQL: each chunk's transaction has its result row written when it
asks whether it was the last, and neither sees the other's uncommitted row.
The job row's lock makes the second wait for the first's commit, then count
it. Without the lock, neither would write the event."""

from __future__ import annotations

import datetime as dt
import threading
import time

from sqlalchemy import Engine, func, insert, select

from services.worker.context import WorkerContext
from shared.adapters.db.tables import chunk_results
from shared.adapters.db.tables import outbox as webhook_events
from shared.adapters.db.webhooks import events
from shared.domain.money import ZERO
from tests.support.factories import promo_doc, promo_line, store_job, uid


def _result_row(chunk_id: str, job_id: str, now: dt.datetime) -> dict[str, object]:
    return {
        "chunk_id": chunk_id,
        "job_id": job_id,
        "source": "chunk",
        "posted": 1,
        "disputed": 0,
        "duplicate": 0,
        "dead_lettered": 0,
        "amount_posted": ZERO,
        "amount_disputed": ZERO,
        "created_at": now,
    }


def test_two_last_chunks_at_once_write_one_job_completed(ctx: WorkerContext) -> None:
    engine: Engine = ctx.engine
    vendor = uid("RACE-")
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")]) for _ in range(2)]
    small = ctx.settings.model_copy(update={"max_chunk_documents": 1})
    job_id, messages = store_job(engine, small, ctx.internal_key, docs)
    assert len(messages) == 2
    now = dt.datetime.now(dt.UTC)
    first_asked = threading.Event()
    second_done = threading.Event()
    errors: list[BaseException] = []

    def second() -> None:
        try:
            with engine.begin() as conn:
                conn.execute(insert(chunk_results).values(_result_row(uid("c2-"), job_id, now)))
                first_asked.wait(10)
                events.after_chunk(conn, job_id, now)  # waits on the first's lock
            second_done.set()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=second)
    thread.start()
    with engine.begin() as conn:
        conn.execute(insert(chunk_results).values(_result_row(uid("c1-"), job_id, now)))
        events.after_chunk(conn, job_id, now)  # sees 1 of 2: not the last
        first_asked.set()
        time.sleep(0.5)
        assert not second_done.is_set()  # the second waits for this commit
    thread.join(10)
    assert not errors and second_done.is_set()
    with engine.connect() as conn:
        written = conn.execute(
            select(func.count()).where(
                webhook_events.c.subject == job_id, webhook_events.c.type == "job.completed"
            )
        ).scalar_one()
    assert written == 1
