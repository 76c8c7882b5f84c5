"""An X12 file's job stored while the file is mapped (services/api/intake/job_store.py)
on the real PostgreSQL ledger: each chunk is inserted into the job's one open
transaction as it is built, and nothing is visible, nor left, until that
transaction commits after the last one.

SQLite holds a file's chunks and writes them at the end (one writer at a
time); test_edi_intake.py runs the same answers on both ledgers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from services.api.app import create_app
from services.api.intake import job_store
from services.api.intake.job_store import DEPTH
from services.commands.client import Client
from services.worker.context import WorkerContext
from shared.adapters.db import tables
from shared.adapters.db.edi.tables import edi_acknowledgements, edi_interchanges
from shared.adapters.db.jobs import writer as job_writer
from shared.domain.pipeline.chunking import NewChunk
from tests.support.factories import uid
from tests.support.infra import (
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_PARTITIONS,
    SCOPED_SECRET,
    ServiceEnv,
)
from tests.support.x12_files import Freight, freight_file, next_control_number

X12 = "application/edi-x12"
INVOICES = 8  # one a chunk: seven chunks are stored before the last set is mapped


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    # One document a chunk: a small file is then many chunks.
    settings = backend_env.settings(max_chunk_documents=1)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def api(http: TestClient) -> Client:
    return Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)


def submit_x12(client: Client, body: bytes, key: str | None = None) -> Any:
    return client.submit(body, X12, key, {"contract_version": 1})


def counts(ctx: WorkerContext) -> tuple[int, ...]:
    """Rows of every table a submission writes."""
    with ctx.engine.connect() as conn:
        return tuple(
            conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in (
                tables.jobs,
                tables.chunks,
                tables.job_partitions,
                edi_interchanges,
                edi_acknowledgements,
            )
        )


def invoices(scac: str, n: int = INVOICES) -> list[Freight]:
    return [Freight(uid("F"), scac) for _ in range(n)]


class Added:
    """Spies on the chunks inserted into open transactions; ``during`` runs
    in the store's thread before each insert (its number, from 1, and the job)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, during: Any = None) -> None:
        self.chunks: list[str] = []
        real = job_writer.JobWriter.add
        spy = self

        def add(writer: job_writer.JobWriter, chunk: NewChunk) -> None:
            spy.chunks.append(chunk.id)
            if during is not None:
                during(len(spy.chunks), writer)
            real(writer, chunk)

        monkeypatch.setattr(job_writer.JobWriter, "add", add)


def _with_bad_last_total(files: list[Freight], isa13: int | None = None) -> bytes:
    """The file with its last set's B3-07 one cent off its L1s: refused
    ``edi_total_mismatch``, a problem the mapping meets only at that set."""
    body = freight_file(*files, isa13=isa13)
    last = files[-1].invoice.encode()
    billed = b"*PP**20260315*29000**"
    marked = b"B3**" + last + b"*SHP" + last + billed
    assert body.count(marked) == 1
    return body.replace(marked, marked.replace(b"29000", b"29001"))


def test_a_file_refused_at_its_last_set_stores_nothing_of_the_chunks_written_before(
    api: Client, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int]] = []

    def look(n: int, writer: job_writer.JobWriter) -> None:
        # What another connection sees of the job while it is being written.
        with ctx.engine.connect() as conn:
            job = select(func.count()).where(tables.jobs.c.id == writer.head.id)
            stored = select(func.count()).where(tables.chunks.c.job_id == writer.head.id)
            seen.append((conn.execute(job).scalar_one(), conn.execute(stored).scalar_one()))

    added = Added(monkeypatch, look)
    before = counts(ctx)
    response = submit_x12(api, _with_bad_last_total(invoices(uid("C").upper())))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "edi_total_mismatch"
    assert len(added.chunks) == INVOICES - 2  # written, then rolled back
    assert set(seen) == {(0, 0)}  # never visible to anyone else
    assert counts(ctx) == before


def test_a_partition_refused_after_its_chunks_were_written_stores_nothing(
    http: TestClient, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = Added(monkeypatch)
    scoped = Client("http://testserver", SCOPED_ID, SCOPED_SECRET, http=http)
    files = [*invoices(SCOPED_PARTITIONS[0]), Freight(uid("F"), "VENDOR-9999")]
    before = counts(ctx)
    response = submit_x12(scoped, freight_file(*files))
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "partition_not_allowed"
    # Every chunk but the last: the refusal comes before the batch is closed.
    assert len(added.chunks) == len(files) - 1
    assert counts(ctx) == before


def test_an_accepted_files_job_holds_every_chunk_and_its_totals(
    api: Client, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = Added(monkeypatch)
    response = submit_x12(api, freight_file(*invoices(uid("C").upper())))
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert (accepted["documents"], accepted["chunks"]) == (INVOICES, INVOICES)
    job = api.get(f"/v1/jobs/{accepted['job_id']}").json()
    assert (job["state"], job["documents"], job["chunks"]["total"]) == (
        "accepted",
        INVOICES,
        INVOICES,
    )
    c = tables.chunks.c
    with ctx.engine.connect() as conn:
        stored = conn.execute(
            select(c.id, c.seq).where(c.job_id == accepted["job_id"]).order_by(c.seq)
        ).all()
    assert [r.id for r in stored] == added.chunks
    assert [r.seq for r in stored] == list(range(INVOICES))
    assert api.acknowledgement(accepted["job_id"]).status_code == 200


def test_the_mapping_waits_for_the_database_holding_a_few_chunks(
    api: Client, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the first insert is held up, the mapping thread hands on at most
    ``DEPTH`` chunks more (the queue's) and one it waits with: a file's chunks
    are never all in memory, however slow the database."""
    built: list[str] = []  # the chunks the mapping closed and handed to the store
    real_put = job_store.StreamedStore.put

    def put(store: job_store.StreamedStore, chunk: NewChunk) -> None:
        built.append(chunk.id)
        real_put(store, chunk)

    monkeypatch.setattr(job_store.StreamedStore, "put", put)
    answer: list[Any] = []
    sender = threading.Thread(
        target=lambda: answer.append(submit_x12(api, freight_file(*invoices("HOLD", 20))))
    )
    with ctx.engine.connect() as holder:
        # The store's inserts wait for this connection, as for a slow database.
        holder.execute(text("LOCK TABLE chunks IN SHARE MODE"))
        sender.start()
        try:
            deadline = time.monotonic() + 10
            settled = -1
            while time.monotonic() < deadline:  # until the mapping stops for the queue
                time.sleep(0.3)
                if built and len(built) == settled:
                    break
                settled = len(built)
            assert 1 <= len(built) <= DEPTH + 2, built
        finally:
            holder.rollback()
    sender.join(timeout=30)
    [response] = answer
    assert response.status_code == 202, response.text
    assert response.json()["chunks"] == 20


@pytest.mark.parametrize("keys", [(None, None), ("one", "other")], ids=["no key", "two keys"])
def test_the_same_file_twice_at_once_is_one_job(
    api: Client, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch, keys: tuple[Any, Any]
) -> None:
    """Both requests found no job before either began to store one: the job's
    idempotency key (one key) or its interchange (two) decides, the second
    transaction waiting for the first, and the second request is its repeat."""
    both = threading.Barrier(2)
    real_begin = job_writer.JobWriter.begin

    def begin(writer: job_writer.JobWriter) -> None:
        both.wait(timeout=10)  # each request checked for a repeat, and found none
        real_begin(writer)

    monkeypatch.setattr(job_writer.JobWriter, "begin", begin)
    body = freight_file(*invoices(uid("C").upper(), 3))
    before = counts(ctx)
    answers: list[Any] = []

    def send(key: str | None) -> None:
        answers.append(submit_x12(api, body, None if key is None else uid(key)))

    threads = [threading.Thread(target=send, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(r.status_code for r in answers) == [200, 202], [r.text for r in answers]
    assert answers[0].json() == answers[1].json()
    jobs, chunks, partitions, interchanges, acks = counts(ctx)
    assert (jobs, chunks, partitions, interchanges, acks) == (
        before[0] + 1,
        before[1] + 3,
        before[2] + 1,
        before[3] + 1,
        before[4] + 1,
    )


def test_a_connection_lost_while_chunks_are_stored_is_503_and_stores_nothing(
    api: Client, ctx: WorkerContext, backend_env: ServiceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database ends the store's connection after its second chunk (as a
    restart or a failover would): the producer gets 503, nothing is stored, and
    the next file is accepted on a new connection."""

    def kill(n: int, writer: job_writer.JobWriter) -> None:
        if n != 3:
            return
        assert writer._conn is not None
        pid = writer._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        with psycopg.connect(backend_env.database_url, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
            while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                time.sleep(0.01)

    added = Added(monkeypatch, kill)
    before = counts(ctx)
    response = submit_x12(api, freight_file(*invoices(uid("C").upper())))
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "database_unavailable"
    assert len(added.chunks) >= 3
    assert counts(ctx) == before
    monkeypatch.undo()
    again = submit_x12(api, freight_file(*invoices(uid("C").upper())))
    assert again.status_code == 202, again.text


def test_a_reused_interchange_is_409_before_the_files_sets_are_mapped(
    api: Client, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known once the file is read: no transaction is opened for it, and a
    problem in its sets (which only mapping finds) does not come first."""
    isa13 = next_control_number()
    assert submit_x12(api, freight_file(*invoices("FIRST"), isa13=isa13)).status_code == 202
    body = _with_bad_last_total(invoices("OTHER"), isa13)
    added = Added(monkeypatch)
    before = counts(ctx)
    response = submit_x12(api, body)
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "edi_duplicate_interchange"
    assert (added.chunks, counts(ctx)) == ([], before)


@pytest.mark.parametrize(
    ("setting", "code"),
    [
        ({"broker_url": "amqp://guest:guest@127.0.0.1:1/"}, "broker_unavailable"),
        ({"database_url": "postgresql://postgres@127.0.0.1:1/none"}, "database_unavailable"),
    ],
    ids=["broker", "database"],
)
def test_a_file_sent_while_the_broker_or_database_is_down_is_503_and_stores_nothing(
    backend_env: ServiceEnv, ctx: WorkerContext, setting: dict[str, str], code: str
) -> None:
    before = counts(ctx)
    body = freight_file(*invoices(uid("C").upper(), 3))
    with TestClient(create_app(backend_env.settings(max_chunk_documents=1, **setting))) as http:
        client = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        response = submit_x12(client, body)
        assert (response.status_code, response.json()["error"]["code"]) == (503, code)
        # The producer's retry is not mistaken for a repeat of a withdrawn job.
        assert submit_x12(client, body).status_code == 503
    assert counts(ctx) == before
