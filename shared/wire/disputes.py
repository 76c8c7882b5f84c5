"""A dispute on the wire (docs/api.md#disputes): what ``GET /v1/disputes/{id}``
answers and a ``dispute.resolved`` event's data holds. Amounts are strings."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Literal, Protocol

from pydantic import BaseModel

from shared.domain.disputes import Decision, Status
from shared.domain.kinds import shown
from shared.wire.times import iso

DecisionName = Literal["accept_claim", "accept_model", "settle_at"]
StatusName = Literal["open", "resolved", "superseded"]


class ResolutionRow(Protocol):
    """What ``dispute`` reads of a resolution (``shared.adapters.db.disputes.queue.Resolution``)."""

    @property
    def decision(self) -> Decision: ...
    @property
    def amount(self) -> Decimal: ...
    @property
    def note(self) -> str: ...
    @property
    def resolved_at(self) -> dt.datetime: ...
    @property
    def resolved_by(self) -> str: ...
    @property
    def ledger_entry_id(self) -> int: ...


class DisputeRow(Protocol):
    """What ``dispute`` reads of a dispute, as the database's readers hold it
    (``shared.adapters.db.disputes.queue.Dispute``): a protocol, so that the wire
    depends on no adapter."""

    @property
    def id(self) -> int: ...
    @property
    def ledger_entry_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def partition_key(self) -> str: ...
    @property
    def job_id(self) -> str: ...
    @property
    def document_id(self) -> str: ...
    @property
    def line_ref(self) -> str: ...
    @property
    def reconciliation_key(self) -> str: ...
    @property
    def contract_version(self) -> int: ...
    @property
    def claimed_amount(self) -> Decimal: ...
    @property
    def model_amount(self) -> Decimal: ...
    @property
    def variance(self) -> Decimal: ...
    @property
    def status(self) -> Status: ...
    @property
    def opened_at(self) -> dt.datetime: ...
    @property
    def resolution(self) -> ResolutionRow | None: ...


class DisputeResolution(BaseModel):
    decision: DecisionName
    amount: str
    note: str
    resolved_at: str
    resolved_by: str  # the operator token's fingerprint, never the token
    ledger_entry_id: int  # the ``resolved`` ledger row


class Dispute(BaseModel):
    id: int
    ledger_entry_id: int
    kind: str
    partition_key: str
    job_id: str
    document_id: str
    line_ref: str
    reconciliation_key: str
    contract_version: int
    claimed_amount: str
    model_amount: str
    variance: str  # claimed - model
    status: StatusName
    opened_at: str
    resolution: DisputeResolution | None


def dispute(d: DisputeRow) -> Dispute:
    r = d.resolution
    return Dispute(
        id=d.id,
        ledger_entry_id=d.ledger_entry_id,
        kind=d.kind,
        partition_key=d.partition_key,
        job_id=d.job_id,
        document_id=d.document_id,
        line_ref=d.line_ref,
        reconciliation_key=d.reconciliation_key,
        contract_version=d.contract_version,
        claimed_amount=shown(d.kind, d.claimed_amount),
        model_amount=shown(d.kind, d.model_amount),
        variance=shown(d.kind, d.variance),
        status=d.status,
        opened_at=iso(d.opened_at) or "",
        resolution=None
        if r is None
        else DisputeResolution(
            decision=r.decision,
            amount=shown(d.kind, r.amount),
            note=r.note,
            resolved_at=iso(r.resolved_at) or "",
            resolved_by=r.resolved_by,
            ledger_entry_id=r.ledger_entry_id,
        ),
    )
