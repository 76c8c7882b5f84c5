"""Per-line outcomes of a job, paged by id (SPEC §3.3, §9)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from shared.db import tables

LO = tables.line_outcomes


def list_lines(
    engine: Engine, job_id: str, *, outcome: str | None, after_id: int | None, limit: int
) -> list[Any]:
    query = select(LO).where(LO.c.job_id == job_id)
    if outcome is not None:
        query = query.where(LO.c.outcome == outcome)
    if after_id is not None:
        query = query.where(LO.c.id > after_id)
    with engine.connect() as conn:
        return list(conn.execute(query.order_by(LO.c.id).limit(limit)).all())
