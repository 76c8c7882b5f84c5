"""Outcome events (docs/architecture.md#outcome-events): one per posted, disputed or
resolved ledger row, published in batches: one message per committed unit,
outcome and kind, at most ``event_batch_max`` events each."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, get_args

import msgspec

from shared.domain.pipeline.units import LedgerRow, UnitResult

_encode = msgspec.json.Encoder().encode

# Most events one message may carry (SETTLEQ_EVENT_BATCH_MAX's upper bound): a
# settlement event is at most ~1.5 KB of JSON, so a message stays near 15 MB,
# far below RabbitMQ's 128 MiB limit and what a consumer holds in memory; a
# resolution's longer note is no concern, as its units hold at most 1,000 events.
EVENT_BATCH_LIMIT = 10_000
COUNT_HEADER = "x-event-count"
# The close of a period: one message of its own (its routing key, and its
# outbox row's type), whose id names the period, so a republish keeps it.
PERIOD_CLOSED = "period.closed"
# Every ledger row's outcome (docs/architecture.md#ledger-schema): settlement's
# (posted, disputed), a dispute's resolution, and a remittance's rows
# (docs/architecture.md#remittances-and-deductions). Each row is an event
# ``settlement.<outcome>``, routed ``settlement.<outcome>.<kind>``.
LedgerOutcome = Literal["posted", "disputed", "resolved", "deducted", "written_off"]
LEDGER_OUTCOMES: tuple[str, ...] = get_args(LedgerOutcome)


def event_id(reconciliation_key: str, contract_version: int, outcome: str = "posted") -> str:
    """Stable across retries and relays: the identity of the ledger row. A
    ``resolved`` row shares its disputed row's key and version, so its identity
    adds ``|resolved`` (there is at most one per disputed row)."""
    text = f"{reconciliation_key}|{contract_version}"
    if outcome == "resolved":
        text += "|resolved"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def message_id(event_ids: Iterable[str]) -> str:
    """A message's AMQP ``message_id``: the first 32 hex digits of the SHA-256 of
    its events' ids, sorted, one per line. The same events published again (a
    relay that died before its unit was marked) give the same id."""
    return hashlib.sha256("\n".join(sorted(event_ids)).encode()).hexdigest()[:32]


def routing_key(outcome: str, kind: str) -> str:
    return f"settlement.{outcome}.{kind}"


def occurred_at_text(occurred_at: dt.datetime) -> str:
    """An event's ``occurred_at``: its unit's commit time, UTC, ISO-8601 with ``Z``."""
    if occurred_at.tzinfo is None:
        occurred_at = occurred_at.replace(tzinfo=dt.UTC)
    return occurred_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


# The ledger columns an event is made of, in this order: the relay selects them
# so, the writer returns its rows so (``LedgerRow``), and ``event`` unpacks them
# (by position: reading a row's attributes by name is dearer).
LEDGER_FIELDS = LedgerRow._fields
# An event's amounts are at the ledger's scale, 4 places, however they reach
# it: PostgreSQL's NUMERIC(20,4) text as the relay reads it, or the Decimal the
# writer wrote, so the process that commits and the relay publish the same bytes.
_SCALE = Decimal("0.0001")
_TYPES = {outcome: f"settlement.{outcome}" for outcome in LEDGER_OUTCOMES}


class Event(msgspec.Struct, gc=False):
    """One outcome event as consumers receive it (JSON keys in this order)."""

    event_id: str
    type: str
    kind: str
    job_id: str
    document_id: str
    line_ref: str
    partition_key: str
    reconciliation_key: str
    contract_version: int
    correlation_id: str | None
    amount: str | None
    claimed_amount: str | None
    delta: str | None
    occurred_at: str
    period: str  # the row's booking period


class ResolvedEvent(Event, gc=False):
    """A dispute's resolution (``settlement.resolved``): the decision behind it
    and the disputed row it supersedes."""

    decision: str
    note: str
    supersedes_id: int


def event(row: Sequence[Any], occurred_at: str, resolution: Any = None) -> Event:
    """The event of one ledger row (its ``LEDGER_FIELDS``, in order); amounts as
    strings (given as Decimals, or as their wire text already). ``occurred_at``
    comes from ``occurred_at_text`` (one per committed unit, not one per event).
    A resolved row's event adds its ``resolution``'s ``decision`` and ``note``,
    and the disputed row it supersedes."""
    (
        _,
        key,
        version,
        outcome,
        kind,
        job_id,
        document_id,
        line_ref,
        partition_key,
        correlation_id,
        amount,
        claimed_amount,
        delta,
        supersedes_id,
        period,
    ) = row
    amount_text = _wire(amount)
    common = (
        event_id(key, version, outcome),
        _TYPES.get(outcome) or f"settlement.{outcome}",
        kind,
        job_id,
        document_id,
        line_ref,
        partition_key,
        key,
        version,
        correlation_id,
        amount_text,
        # Most claims are the amount (a posted line), and a first row's delta is it:
        # an amount's text depends on its value alone, so it is made once.
        amount_text if claimed_amount == amount else _wire(claimed_amount),
        amount_text if delta is amount else _wire(delta),
        occurred_at,
        period,
    )
    if resolution is None:
        return Event(*common)
    return ResolvedEvent(*common, resolution.decision, resolution.note, supersedes_id)


def _wire(amount: Any) -> str | None:
    if amount is None:
        return None
    if type(amount) is str:
        return amount  # NUMERIC(20,4)'s text: 4 places already
    # str() of a Decimal at 4 places never takes an exponent, and is cheaper than format().
    text = str(amount.quantize(_SCALE))
    # PostgreSQL's NUMERIC has no negative zero: neither has an event.
    return text[1:] if text[0] == "-" and not amount else text


def unit_events(result: UnitResult) -> list[Event]:
    """The events of a committed unit, from the rows its writer wrote (no read back)."""
    occurred_at = occurred_at_text(result.committed_at)
    return [event(row, occurred_at) for row in result.rows]


@dataclass(frozen=True)
class Message:
    """One AMQP message of the events exchange: ``count`` events of one unit,
    outcome and kind, as the JSON body ``{"events": [...]}``."""

    message_id: str
    routing_key: str
    body: bytes
    event_ids: tuple[str, ...]

    @property
    def count(self) -> int:
        """Its events (the ``x-event-count`` header)."""
        return len(self.event_ids)


def unit_messages(events: Iterable[Event], batch_max: int) -> list[Message]:
    """The messages of one committed unit's events (given in commit order): one
    per outcome and kind, in the order each first occurs, split after every
    ``batch_max`` events; each keeps its events in commit order."""
    if not 1 <= batch_max <= EVENT_BATCH_LIMIT:
        raise ValueError(f"event_batch_max is 1 to {EVENT_BATCH_LIMIT}")
    groups: dict[tuple[str, str], list[Event]] = {}
    for one in events:
        groups.setdefault((one.type, one.kind), []).append(one)
    messages = []
    for (event_type, kind), grouped in groups.items():
        key = routing_key(event_type.removeprefix("settlement."), kind)
        for start in range(0, len(grouped), batch_max):
            part = grouped[start : start + batch_max]
            ids = tuple(one.event_id for one in part)
            messages.append(Message(message_id(ids), key, _encode({"events": part}), ids))
    return messages


def encoded_message(eid: str, key: str, encoded_event: bytes) -> Message:
    """The message of one event already encoded (an outbox row of the older
    one-event-per-row form keeps its event's JSON as it was written)."""
    return Message(message_id([eid]), key, b'{"events":[' + encoded_event + b"]}", (eid,))
