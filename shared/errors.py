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


class ClaimContended(TransientError):
    """Another attempt holds a lease this one needs. That says nothing against
    this attempt: the holder is alive (it commits, and these lines are then
    duplicates) or dead (its lease runs out within ``wait_ms``). So the unit is
    retried once the lease has run, and the wait is not counted as an attempt
    (docs/architecture.md#dedup-leases)."""

    reason = "claim_contended"

    def __init__(self, keys: int, wait_ms: int) -> None:
        super().__init__(message=f"{keys} keys are leased by another worker")
        self.wait_ms = wait_ms


class StructuralError(SettleqError):
    reason = "schema_invalid"


class BusinessError(SettleqError):
    reason = "business_rule"
