"""The X12 intake's storage (docs/api.md#edi-intake): the interchanges a job
received, its 997, and this system's control numbers.

The interchanges and the 997 are written with their job, in its transaction
(``jobs.create_job``, or ``jobs/writer.py`` as its chunks are built): a refused
or failed submission leaves none behind.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, and_, delete, insert, or_, select, text

from shared.adapters.db.edi.tables import (
    CONTROL_NUMBER_MAX,
    edi_acknowledgements,
    edi_control_numbers,
    edi_interchanges,
)


@dataclass(frozen=True)
class Sender:
    """An interchange's name: ISA05/ISA06 (trimmed) and ISA13 (within the
    producer key that submits it), and how many transaction sets it holds."""

    qualifier: str
    id: str
    control_number: str
    sets: int | None = field(default=None, compare=False)  # None: not known (stored before)


@dataclass(frozen=True)
class EdiRecord:
    """What an X12 job stores besides its chunks."""

    interchanges: Sequence[Sender]
    file_sha256: str
    acknowledgement: bytes | None  # the 997 file; none when the partner's profile asks none


@dataclass(frozen=True)
class Received:
    """An interchange accepted before, and the job that took it."""

    sender: Sender
    file_sha256: str
    job_id: str
    key_id: str


def allocate_control_numbers(engine: Engine, count: int) -> list[int]:
    """``count`` new control numbers, increasing across processes (wrapping
    after nine digits). A number handed out and then not used is a gap: a 997's
    numbers need only be unique and increasing, not dense."""
    if count <= 0:
        return []
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            rows = conn.execute(
                text("SELECT nextval('edi_control_number') FROM generate_series(1, :n)"),
                {"n": count},
            )
            return sorted(int(r[0]) for r in rows)
        numbers = []
        for _ in range(count):
            inserted = conn.execute(insert(edi_control_numbers)).inserted_primary_key
            assert inserted is not None
            numbers.append(int(inserted[0]))
        conn.execute(delete(edi_control_numbers))
    return [(n - 1) % CONTROL_NUMBER_MAX + 1 for n in numbers]


def insert_edi(
    conn: Connection, job_id: str, key_id: str, record: EdiRecord, now: dt.datetime
) -> None:
    """Store a new X12 job's interchanges and 997; an interchange the same key
    had accepted before makes the transaction fail (IntegrityError), whoever
    wrote it first."""
    insert_interchanges(conn, job_id, key_id, record.interchanges, record.file_sha256, now)
    if record.acknowledgement is not None:
        insert_acknowledgement(conn, job_id, record.acknowledgement, now)


def insert_interchanges(
    conn: Connection,
    job_id: str,
    key_id: str,
    senders: Sequence[Sender],
    file_sha256: str,
    now: dt.datetime,
) -> None:
    """A new X12 job's interchanges, named within its producer key. In their
    sorted order: two transactions inserting some of the same ones wait for
    each other in one order, never in a cycle (a deadlock), whatever order
    their files name them in."""
    conn.execute(
        edi_interchanges.insert(),
        [
            {
                "sender_qualifier": s.qualifier,
                "sender_id": s.id,
                "control_number": s.control_number,
                "job_id": job_id,
                "file_sha256": file_sha256,
                "received_at": now,
                "key_id": key_id,
                "sets": s.sets,
            }
            for s in sorted(senders, key=lambda s: (s.qualifier, s.id, s.control_number))
        ],
    )


def insert_acknowledgement(conn: Connection, job_id: str, body: bytes, now: dt.datetime) -> None:
    conn.execute(edi_acknowledgements.insert().values(job_id=job_id, body=body, created_at=now))


def delete_edi(conn: Connection, job_id: str) -> None:
    conn.execute(delete(edi_interchanges).where(edi_interchanges.c.job_id == job_id))
    conn.execute(delete(edi_acknowledgements).where(edi_acknowledgements.c.job_id == job_id))


def received_before(engine: Engine, key_id: str, senders: Sequence[Sender]) -> list[Received]:
    """Those of ``senders`` already accepted from producer key ``key_id``, with
    their jobs. Another key's interchanges are never found: each key names its
    own (docs/api.md#duplicate-interchanges)."""
    if not senders:
        return []
    i = edi_interchanges.c
    found: list[Received] = []
    with engine.connect() as conn:
        # A file names few interchanges, mostly one: a few hundred per query.
        for start in range(0, len(senders), 200):
            part = senders[start : start + 200]
            match = or_(
                *(
                    and_(
                        i.sender_qualifier == s.qualifier,
                        i.sender_id == s.id,
                        i.control_number == s.control_number,
                    )
                    for s in part
                )
            )
            rows = conn.execute(
                select(
                    i.sender_qualifier,
                    i.sender_id,
                    i.control_number,
                    i.file_sha256,
                    i.job_id,
                    i.key_id,
                ).where(i.key_id == key_id, match)
            )
            found += [
                Received(
                    Sender(r.sender_qualifier, r.sender_id, r.control_number),
                    r.file_sha256,
                    r.job_id,
                    r.key_id,
                )
                for r in rows
            ]
    return found


def acknowledgement(engine: Engine, job_id: str) -> bytes | None:
    with engine.connect() as conn:
        body = conn.execute(
            select(edi_acknowledgements.c.body).where(edi_acknowledgements.c.job_id == job_id)
        ).scalar_one_or_none()
    return None if body is None else bytes(body)
