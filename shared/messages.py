"""Chunk messages: what travels on the broker, signed with the internal key.

A message carries a reference to the stored chunk (claim check) and the
SHA-256 of its payload, never the payload itself, so no broker message grows
with the batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from shared.errors import StructuralError
from shared.signing import sign_message, verify_message

FAST_PATH = "fast_path"
COMPUTE_HEAVY = "compute_heavy"
VALIDATE_ACTOR = "validate"
SETTLE_ACTOR = "settle"


@dataclass(frozen=True)
class ChunkMessage:
    chunk_id: str
    job_id: str
    kind: str
    payload_sha256: str

    def signed(self, key: bytes) -> dict[str, Any]:
        fields = asdict(self)
        return {**fields, "sig": sign_message(key, fields)}


def open_message(key: bytes, raw: Any) -> ChunkMessage:
    """Verify a received message; raise ``StructuralError('signature_mismatch')``."""
    if not isinstance(raw, dict):
        raise StructuralError("signature_mismatch", "chunk message is not an object")
    fields: dict[str, Any] = {
        k: raw.get(k) for k in ("chunk_id", "job_id", "kind", "payload_sha256")
    }
    sig = raw.get("sig")
    if (
        not all(isinstance(v, str) for v in fields.values())
        or not isinstance(sig, str)
        or set(raw) != {*fields, "sig"}
        or not verify_message(key, fields, sig)
    ):
        raise StructuralError("signature_mismatch", "chunk message signature does not match")
    return ChunkMessage(**fields)
