"""A stored chunk as a worker reads it: its bytes, the digest the front door
signed, whether it was processed, and its job's stored state."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select

from shared.adapters.db.tables import chunk_results, chunks, jobs


def stored_state(conn: Connection, job_id: str) -> tuple[str, dt.datetime] | None:
    """A job's stored state and creation time; None once a submission that never
    got its 202 has been withdrawn (or for a job never stored)."""
    row = conn.execute(select(jobs.c.state, jobs.c.created_at).where(jobs.c.id == job_id)).first()
    if row is None:
        return None
    created: dt.datetime = row.created_at
    return row.state, created if created.tzinfo else created.replace(tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class StoredChunk:
    id: str
    job_id: str
    seq: int  # its place in the batch, from 0 (shared/domain/pipeline/units.py::chunk_start)
    kind: str
    documents: int
    lines: int
    payload: bytes
    payload_sha256: str


# In PostgreSQL's binary format: as text, a bytea travels hex-encoded, which
# costs both sides more to encode and decode than the bytes themselves.
_LOAD_CHUNK_BINARY = (
    "SELECT id, job_id, seq, kind, documents, lines, payload, payload_sha256"
    " FROM chunks WHERE id = %s"
)


def load_chunk(conn: Connection, chunk_id: str) -> StoredChunk | None:
    if conn.dialect.name == "postgresql":
        dbapi = conn.connection.dbapi_connection
        with dbapi.cursor(binary=True) as cursor:  # type: ignore[union-attr]
            cursor.execute(_LOAD_CHUNK_BINARY, (chunk_id,))
            found = cursor.fetchone()
    else:
        found = conn.execute(
            select(
                chunks.c.id,
                chunks.c.job_id,
                chunks.c.seq,
                chunks.c.kind,
                chunks.c.documents,
                chunks.c.lines,
                chunks.c.payload,
                chunks.c.payload_sha256,
            ).where(chunks.c.id == chunk_id)
        ).first()
    if found is None:
        return None
    id_, job_id, seq, kind, documents, lines, payload, digest = found
    return StoredChunk(id_, job_id, seq, kind, documents, lines, bytes(payload), digest)


def chunk_processed(conn: Connection, chunk_id: str) -> bool:
    return (
        conn.execute(
            select(chunk_results.c.chunk_id).where(chunk_results.c.chunk_id == chunk_id)
        ).first()
        is not None
    )


def job_payloads(engine: Engine, job_id: str) -> Iterator[StoredChunk]:
    """A job's stored chunks in batch order (by ``seq``), each read in a short
    transaction of its own: a chunk can hold tens of megabytes."""
    with engine.connect() as conn:
        ids = (
            conn.execute(
                select(chunks.c.id).where(chunks.c.job_id == job_id).order_by(chunks.c.seq)
            )
            .scalars()
            .all()
        )
    for chunk_id in ids:
        with engine.connect() as conn:
            chunk = load_chunk(conn, chunk_id)
        if chunk is not None:
            yield chunk
