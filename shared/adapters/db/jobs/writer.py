"""A new job written in ONE transaction while its chunks are still being built
(docs/architecture.md#front-door): the jobs row and an X12 job's interchanges
first, then each chunk as it comes, and at the end the job's totals, its
partitions and its 997, then the commit. Nothing of it is visible before
the commit, and a rollback leaves nothing, as ``jobs.create_job``'s single
statement batch would; the difference is that no chunk waits in memory for
the last one.

Writing the jobs row and the interchanges first also decides a race early:
a second transaction with the same idempotency key or interchange waits on
the first one's rows and fails (``Raced``) as soon as that one commits.

One writer is used by one thread at a time (``services/api/intake/job_store.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, update
from sqlalchemy.exc import IntegrityError

from shared.adapters.db.edi import store as edi
from shared.adapters.db.jobs.intake import chunk_row, job_row, partition_rows
from shared.adapters.db.tables import chunks, job_partitions, jobs
from shared.domain.pipeline.chunking import NewChunk


class Raced(Exception):
    """Another request stored this job's idempotency key or one of its
    interchanges first (the unique constraints decided)."""


@dataclass(frozen=True)
class JobHead:
    """What a job is known by before its first chunk: its name and identity."""

    id: str
    key_id: str
    idempotency_key: str
    body_sha256: str
    kind: str
    source_format: str
    senders: Sequence[edi.Sender] = ()  # an X12 job's interchanges
    file_sha256: str = ""  # an X12 job's file, as received


@dataclass(frozen=True)
class JobTotals:
    """What a job's rows say once its last chunk is stored."""

    documents: int
    lines: int
    chunks: int
    partition_keys: Iterable[str]
    acknowledgement: bytes | None = None  # an X12 job's 997


class JobWriter:
    def __init__(self, engine: Engine, head: JobHead) -> None:
        self.engine, self.head = engine, head
        self._now = dt.datetime.now(dt.UTC)
        self._conn: Connection | None = None

    def begin(self) -> None:
        """Open the transaction and write the job's row (``receiving``, no
        chunk yet) and its interchanges. ``Raced``; ``OperationalError`` when
        the database is down."""
        head, now = self.head, self._now
        self._conn = self.engine.connect()
        self._conn.begin()
        # No chunk yet: the totals are written by ``commit``.
        row = job_row(head, now, documents=0, lines=0, chunks_total=0)
        with _raced():
            self._conn.execute(jobs.insert().values(**row))
            if head.senders:
                edi.insert_interchanges(
                    self._conn, head.id, head.key_id, head.senders, head.file_sha256, now
                )

    def add(self, chunk: NewChunk) -> None:
        assert self._conn is not None
        row = chunk_row(self.head.id, self.head.kind, chunk, self._now)
        self._conn.execute(chunks.insert(), [row])

    def commit(self, totals: JobTotals) -> None:
        """The job's totals, partitions and 997, then the commit."""
        conn, job_id = self._conn, self.head.id
        assert conn is not None
        with _raced():
            conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(documents=totals.documents, lines=totals.lines, chunks_total=totals.chunks)
            )
            conn.execute(job_partitions.insert(), partition_rows(job_id, totals.partition_keys))
            if totals.acknowledgement is not None:
                edi.insert_acknowledgement(conn, job_id, totals.acknowledgement, self._now)
            conn.commit()
        self.close()

    def close(self) -> None:
        """Roll back what was not committed and give the connection back (a
        broken one is discarded by the pool)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


@contextmanager
def _raced() -> Iterator[None]:
    """IntegrityError as ``Raced``: the only constraints a new job can break
    are its idempotency key's and its interchanges' (its ids are new)."""
    try:
        yield
    except IntegrityError as exc:
        raise Raced(str(exc.orig)) from exc
