"""What each webhook event tells (docs/api.md#webhooks), rendered once, when
the relay fans it out (fanout.py): the job as ``GET /v1/jobs/{job_id}`` shows it, a job's dead
letters by reason, the dispute of ``GET /v1/disputes/{id}`` with its
resolution, a ping. The wire shapes are those the API answers with (shared/wire/).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine

from shared.adapters.db.disputes import reads as disputes_db
from shared.adapters.db.edi import store as edi_db
from shared.adapters.db.jobs import queries as jobs_db
from shared.adapters.db.remittances import events as remittance_events
from shared.adapters.db.webhooks.deliveries import Waiting
from shared.adapters.db.webhooks.events import (
    DEAD_LETTERS_CREATED,
    DISPUTE_RESOLVED,
    JOB_COMPLETED,
    PING,
)
from shared.wire.disputes import dispute
from shared.wire.jobs import job_view


def data_of(engine: Engine, event: Waiting) -> str | None:
    """The event's data as JSON text; None while its subject cannot be read
    yet (a job whose intake has not marked it accepted)."""
    found: Any
    if event.type == PING:
        found = {"endpoint_id": event.subject, "message": "a test event from settleq"}
    elif event.type in remittance_events.TYPES:
        found = remittance_events.data_of(engine, event.type, event.subject)
    elif event.type == DISPUTE_RESOLVED:
        d = disputes_db.get(engine, int(event.subject))
        found = None if d is None else dispute(d).model_dump(mode="json")
    else:
        status = jobs_db.job_status(engine, event.subject)
        found = None if status is None else _job_data(engine, event.type, status)
    return None if found is None else json.dumps(found, separators=(",", ":"))


def _job_data(engine: Engine, kind: str, status: jobs_db.JobStatus) -> dict[str, Any]:
    job_id = status.job_id
    lines_url = f"/v1/jobs/{job_id}/lines"
    if kind == JOB_COMPLETED:
        data = job_view(status).model_dump(mode="json")
        data["lines_url"] = lines_url
        if status.source_format == "x12":
            # Null when no 997 is stored (a partner's acknowledge: errors_only
            # or never): a URL that answers 404 would be a promise broken.
            stored = edi_db.acknowledgement(engine, job_id) is not None
            data["acknowledgement_url"] = f"/v1/jobs/{job_id}/acknowledgement" if stored else None
        return data
    assert kind == DEAD_LETTERS_CREATED
    reasons = jobs_db.dead_letter_reasons(engine, job_id)
    return {
        "job_id": job_id,
        "kind": status.kind,
        "dead_lettered": sum(reasons.values()),
        "reasons": reasons,
        "lines_url": f"{lines_url}?outcome=dead_lettered",
    }
