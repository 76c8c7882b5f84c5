"""Corrupting what is stored, the way only a bug or an intruder could."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import Engine, update

from shared.adapters.db import tables
from shared.domain.pipeline.messages import ChunkMessage


def replace_stored_payload(
    engine: Engine, key: bytes, message: dict[str, Any], payload: bytes
) -> dict[str, Any]:
    """Overwrite a stored chunk and re-sign its message, so that only the
    schema (not the digest or signature) can catch the damage."""
    with engine.begin() as conn:
        conn.execute(
            update(tables.chunks)
            .where(tables.chunks.c.id == message["chunk_id"])
            .values(payload=payload, payload_sha256=hashlib.sha256(payload).hexdigest())
        )
    return ChunkMessage(
        message["chunk_id"],
        message["job_id"],
        message["kind"],
        hashlib.sha256(payload).hexdigest(),
    ).signed(key)
