"""Storing an X12 submission (docs/api.md#edi-intake): a partner names each
interchange once, by its sender and control number (ISA13).

Each producer key names its own interchanges
(docs/api.md#duplicate-interchanges): another key's files never block, name
or count against its own. The same file again, from
the same producer key and with the same query, is the same job (200),
whatever its Idempotency-Key and whatever profile changed meanwhile. The same
interchange from the same key with other bytes or another query is 409
``edi_duplicate_interchange``. Both are decided once the file is read, before
it is mapped. Two requests at once are decided by the interchanges' unique
constraint: the one whose transaction writes them second waits for the
first's and, once that one commits, finds it here.
"""

from __future__ import annotations

from services.api.context import ApiContext
from services.api.edi.ingest import EdiFile
from services.api.errors import ApiError
from shared.adapters.db.edi import store as edi_db
from shared.adapters.db.jobs import intake as jobs_db
from shared.config.settings import ProducerKey


def accepted_before(ctx: ApiContext, key: ProducerKey, file: EdiFile) -> jobs_db.ExistingJob | None:
    """The job that took this very submission before, or None when none of its
    interchanges was received from ``key``; 409 when one was, as part of
    another of its submissions."""
    found = edi_db.received_before(ctx.engine, key.key_id, file.senders)
    if not found:
        return None
    jobs = {r.job_id for r in found}
    if len(jobs) == 1 and len(found) == len(file.senders):
        job = jobs_db.job_by_id(ctx.engine, found[0].job_id)
        if job is not None and file.repeats(job.body_sha256):
            return job
    same_bytes = all(r.file_sha256 == file.file_sha256 for r in found)
    why = "with other query parameters" if same_bytes else "in another file"
    # The job that holds it is what the partner (or its operator) looks up next.
    holders = sorted(jobs)
    held = f"job {holders[0]}" if len(holders) == 1 else f"jobs {', '.join(holders[:5])}"
    raise ApiError(
        409,
        "edi_duplicate_interchange",
        f"{len(found)} interchange(s) of this file were accepted before {why}, in {held}"
        + (f" and {len(holders) - 5} more" if len(holders) > 5 else ""),
        [
            {
                "sender_qualifier": r.sender.qualifier,
                "sender_id": r.sender.id,
                "control_number": r.sender.control_number,
                "job_id": r.job_id,
            }
            for r in found[:100]
        ],
    )
