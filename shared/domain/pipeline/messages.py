"""Work messages: what travels on the broker, signed with the internal key.

A message carries a reference to the stored chunk (claim check) and the
SHA-256 of its payload, never the payload itself, so no broker message grows
with the batch. A requeued dead letter travels the same way, naming the dead
letter and which requeue of it this is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.domain.signing import sign_message, verify_message
from shared.errors import StructuralError

FAST_PATH = "fast_path"
COMPUTE_HEAVY = "compute_heavy"
# The webhooks component's queue family: not a settlement tier (services/webhooks).
WEBHOOKS = "webhooks"
VALIDATE_ACTOR = "validate"
SETTLE_ACTOR = "settle"

_TEXT_FIELDS = ("chunk_id", "job_id", "kind", "payload_sha256")

MAX_PRIORITY = 9


def priority_for(job_lines: int) -> int:
    """Small jobs first: a 10-line batch must not wait behind a 500,000-line one
    from another producer (docs/architecture.md#isolation-and-fairness). RabbitMQ delivers higher
    values first."""
    if job_lines <= 1_000:
        return MAX_PRIORITY
    if job_lines <= 50_000:
        return 5
    return 1


_REQUEUE_FIELDS = ("dead_letter_id", "requeue")


@dataclass(frozen=True)
class ChunkMessage:
    chunk_id: str
    job_id: str
    kind: str
    payload_sha256: str
    dead_letter_id: int | None = None  # set when this is a requeue of a dead letter
    requeue: int = 0
    priority: int | None = None  # the job's, kept from tier to tier

    def fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {name: getattr(self, name) for name in _TEXT_FIELDS}
        if self.dead_letter_id is not None:
            fields.update(dead_letter_id=self.dead_letter_id, requeue=self.requeue)
        if self.priority is not None:
            fields["priority"] = self.priority
        return fields

    def signed(self, key: bytes) -> dict[str, Any]:
        fields = self.fields()
        return {**fields, "sig": sign_message(key, fields)}


def open_message(key: bytes, raw: Any) -> ChunkMessage:
    """Verify a received message; raise ``StructuralError('signature_mismatch')``."""
    refused = StructuralError("signature_mismatch", "chunk message signature does not match")
    if not isinstance(raw, dict):
        raise refused
    names = set(_TEXT_FIELDS) | ({*_REQUEUE_FIELDS} if "dead_letter_id" in raw else set())
    if "priority" in raw:
        names.add("priority")
    fields: dict[str, Any] = {name: raw.get(name) for name in sorted(names)}
    sig = raw.get("sig")
    well_formed = all(isinstance(fields[n], str) for n in _TEXT_FIELDS) and all(
        type(fields[n]) is int for n in (*_REQUEUE_FIELDS, "priority") if n in fields
    )
    if (
        not well_formed
        or not isinstance(sig, str)
        or set(raw) != {*names, "sig"}
        or not verify_message(key, fields, sig)
    ):
        raise refused
    return ChunkMessage(**fields)
