"""The relay's log event: one ``relay_publish`` per committed unit of work."""

from __future__ import annotations

import datetime as dt
import logging

from shared.adapters.db import outbox
from shared.logs import only, stage_event

log = logging.getLogger("settleq.relay")


def log_published(units: list[outbox.Unit], started: float) -> None:
    """One event per committed unit of work (outbox row), after its commit. The
    outbox knows no chunk, so ``chunk_id`` is null; ``events`` and ``messages``
    count what was published of it; ``lag_ms`` is the time from the settlement's
    commit to its publication."""
    now = dt.datetime.now(dt.UTC)
    for unit in units:
        created = unit.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=dt.UTC)
        stage_event(
            log,
            "relay_publish",
            started=started,
            job_id=only(unit.job_ids),
            chunk_id=None,
            partition_key=only(unit.partition_keys),
            correlation_id=only(unit.correlation_ids),
            status="ok",
            events=unit.events,
            messages=unit.messages,
            lag_ms=round((now - created).total_seconds() * 1000, 1),
        )
