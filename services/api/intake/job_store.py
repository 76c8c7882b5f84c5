"""Where an X12 file's chunks go as the file is mapped (docs/architecture.md#front-door).

On PostgreSQL (``StreamedStore``) each chunk, as soon as the builder closes it,
goes to a thread of the job's own that inserts it into the job's one open
transaction (``shared/adapters/db/jobs/writer.py``), and is then let go of: the
database's work overlaps the mapping (the driver waits without the GIL), and
at most ``DEPTH`` chunks wait between the two threads, so a large file's
chunks (twice its size, for the 210s' base64 ``raw_payload``) are never all
held. The mapping thread waits when the database falls behind.

On SQLite (``HeldStore``) the chunks are held and written at the end in one
short transaction, as a JSON batch's are: SQLite has one writer at a time, and
a transaction open while a file is mapped would hold back every worker's
writes, and the 997's own control numbers, for seconds.

Either way the job is committed only after its last chunk, with its totals
(``commit``); anything else ends in ``abort``, which leaves nothing stored.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import replace
from typing import Protocol

from sqlalchemy import Engine

from shared.adapters.db.edi.store import EdiRecord
from shared.adapters.db.jobs import intake as jobs_db
from shared.adapters.db.jobs.writer import JobHead, JobTotals, JobWriter, Raced
from shared.domain.pipeline.chunking import NewChunk

log = logging.getLogger("settleq.api")

# Chunks waiting for the database at most (about 0.8 MB each at the default
# caps): enough to ride out one slow insert, few enough to hold little.
DEPTH = 4


class JobStore(Protocol):
    def begin(self, kind: str) -> None:
        """The file's kind is known: its job may be written from now on."""

    def put(self, chunk: NewChunk) -> None:
        """Store the next chunk; raises the store's failure (the database is
        down) so that mapping stops. A race lost is raised by ``commit``."""

    def commit(self, totals: JobTotals) -> None:
        """Store the job's totals and commit; ``Raced`` when another request
        stored the same idempotency key or interchange first."""

    def abort(self) -> None:
        """Store nothing (idempotent; never raises)."""


def open_store(engine: Engine, head: JobHead) -> JobStore:
    if engine.dialect.name == "postgresql":
        return StreamedStore(engine, head)
    return HeldStore(engine, head)


class Discard:
    """A store that keeps nothing: a repeat is mapped again only to be
    answered (or refused) as the first time."""

    def begin(self, kind: str) -> None:
        pass

    def put(self, chunk: NewChunk) -> None:
        pass


_END = object()  # after the last chunk: commit if ``_totals`` is set, else roll back


class StreamedStore:
    def __init__(self, engine: Engine, head: JobHead, depth: int = DEPTH) -> None:
        self.engine, self.head = engine, head
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._totals: JobTotals | None = None

    def begin(self, kind: str) -> None:
        writer = JobWriter(self.engine, replace(self.head, kind=kind))
        self._thread = threading.Thread(
            target=self._write, args=(writer,), name="job-store", daemon=True
        )
        self._thread.start()

    def put(self, chunk: NewChunk) -> None:
        failure = self._failure
        if failure is not None and not isinstance(failure, Raced):
            raise failure
        self._queue.put(chunk)

    def commit(self, totals: JobTotals) -> None:
        self._totals = totals
        self._end()
        if self._failure is not None:
            raise self._failure

    def abort(self) -> None:
        self._totals = None
        self._end()

    def _end(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_END)
            thread.join()

    def _write(self, writer: JobWriter) -> None:
        """The store's thread: every database call of the job is made here, on
        the writer's one connection."""
        ended = False
        try:
            writer.begin()
            while (chunk := self._queue.get()) is not _END:
                assert isinstance(chunk, NewChunk)
                writer.add(chunk)
                del chunk  # its payload goes now, not when the next one comes
            ended = True
            if self._totals is not None:
                writer.commit(self._totals)
        except BaseException as exc:
            self._failure = exc
            if not isinstance(exc, Raced):  # raised again in the request, unless it ended
                log.warning("storing job %s failed: %s", writer.head.id, type(exc).__name__)
            # Take what the mapping thread still hands on, so that it never
            # waits on a full queue for a thread that is gone.
            while not ended:
                ended = self._queue.get() is _END
        finally:
            try:
                writer.close()
            except Exception as exc:  # the connection was lost: nothing was committed
                log.warning("closing job %s failed: %s", writer.head.id, type(exc).__name__)


class HeldStore:
    def __init__(self, engine: Engine, head: JobHead) -> None:
        self.engine, self.head = engine, head
        self._chunks: list[NewChunk] = []

    def begin(self, kind: str) -> None:
        self.head = replace(self.head, kind=kind)

    def put(self, chunk: NewChunk) -> None:
        self._chunks.append(chunk)

    def commit(self, totals: JobTotals) -> None:
        head = self.head
        edi = None
        if head.source_format == "x12":  # its interchanges, and its 997 if it has one
            edi = EdiRecord(head.senders, head.file_sha256, totals.acknowledgement)
        new = jobs_db.NewJob(
            id=head.id,
            key_id=head.key_id,
            idempotency_key=head.idempotency_key,
            body_sha256=head.body_sha256,
            kind=head.kind,
            documents=totals.documents,
            lines=totals.lines,
            partition_keys=sorted(totals.partition_keys),
            chunks=self._chunks,
            source_format=head.source_format,
            edi=edi,
        )
        self._chunks = []
        if not jobs_db.create_job(self.engine, new):
            raise Raced(head.id)

    def abort(self) -> None:
        self._chunks = []
