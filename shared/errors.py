"""One exception tree that decides what happens to a failure.

- ``TransientError``: the world was briefly unavailable (connection loss, lock
  timeout, a claim leased by another live worker). Retried with backoff.
- ``StructuralError``: the message itself is wrong (schema, signature, format).
  Dead-lettered at once: retrying cannot fix it.
- ``BusinessError``: the data is well formed but cannot settle (unknown tier,
  negative quantity, unknown contract version). Dead-lettered at once with its
  reason so an operator can fix the cause and requeue.

Every error carries a machine ``reason`` (docs/architecture.md#failures-and-reason-codes).
"""

from __future__ import annotations


class SettleqError(Exception):
    reason: str = "internal_error"

    def __init__(self, reason: str | None = None, message: str = "") -> None:
        if reason is not None:
            self.reason = reason
        super().__init__(message or self.reason)


class TransientError(SettleqError):
    reason = "transient"


class StructuralError(SettleqError):
    reason = "schema_invalid"


class BusinessError(SettleqError):
    reason = "business_rule"
