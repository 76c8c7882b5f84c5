"""Outcome events in batches (shared/domain/pipeline/events.py;
docs/architecture.md#outcome-events):
one message per committed unit, outcome and kind, at most ``event_batch_max``
events each, with a ``message_id`` that the same events always get again."""

from __future__ import annotations

import json
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.pipeline.events import (
    EVENT_BATCH_LIMIT,
    LEDGER_FIELDS,
    Event,
    _wire,
    encoded_message,
    event,
    event_id,
    message_id,
    unit_messages,
)

OCCURRED = "2026-12-01T12:00:00.123456Z"


def ledger_row(n: int, outcome: str = "posted", kind: str = "promo_accrual") -> tuple[Any, ...]:
    """A ledger row as the relay reads it: its LEDGER_FIELDS, in order."""
    values = {
        "id": n,
        "reconciliation_key": f"{n:064x}",
        "contract_version": 1,
        "outcome": outcome,
        "kind": kind,
        "job_id": "job-1",
        "document_id": f"DOC-{n}",
        "line_ref": str(n),
        "partition_key": "VENDOR-1",
        "correlation_id": None,
        "amount": Decimal("1.5000"),
        "claimed_amount": Decimal("1.5000"),
        "delta": Decimal("1.5000"),
        "supersedes_id": None,
        "period": "2026-12",
    }
    return tuple(values[name] for name in LEDGER_FIELDS)


def events_of(*rows: tuple[Any, ...]) -> list[Event]:
    return [event(row, OCCURRED) for row in rows]


def bodies(message: Any) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = json.loads(message.body)["events"]
    return decoded


def test_one_message_per_outcome_and_kind_in_commit_order() -> None:
    rows = [
        ledger_row(1),
        ledger_row(2, "disputed"),
        ledger_row(3),
        ledger_row(4, "resolved", "freight_audit"),
        ledger_row(5, "disputed"),
    ]
    messages = unit_messages(events_of(*rows), 1000)
    assert [m.routing_key for m in messages] == [
        "settlement.posted.promo_accrual",
        "settlement.disputed.promo_accrual",
        "settlement.resolved.freight_audit",
    ]
    assert [[e["document_id"] for e in bodies(m)] for m in messages] == [
        ["DOC-1", "DOC-3"],
        ["DOC-2", "DOC-5"],
        ["DOC-4"],
    ]
    assert [m.count for m in messages] == [2, 2, 1]
    for m in messages:
        assert all(m.routing_key == f"{e['type']}.{e['kind']}" for e in bodies(m))
        assert m.event_ids == tuple(e["event_id"] for e in bodies(m))


@pytest.mark.parametrize(("events", "batch_max", "sizes"), [
    (2500, 1000, [1000, 1000, 500]),
    (1000, 1000, [1000]),
    (1001, 1000, [1000, 1]),
    (3, 1, [1, 1, 1]),
    (5000, EVENT_BATCH_LIMIT, [5000]),
])  # fmt: skip
def test_a_group_is_split_after_event_batch_max(
    events: int, batch_max: int, sizes: list[int]
) -> None:
    messages = unit_messages(events_of(*(ledger_row(n) for n in range(events))), batch_max)
    assert [m.count for m in messages] == sizes
    ids = [e["line_ref"] for m in messages for e in bodies(m)]
    assert ids == [str(n) for n in range(events)]  # every event once, in order
    assert len({m.message_id for m in messages}) == len(messages)


@pytest.mark.parametrize("batch_max", [0, EVENT_BATCH_LIMIT + 1])
def test_a_batch_size_out_of_range_is_refused(batch_max: int) -> None:
    with pytest.raises(ValueError):
        unit_messages(events_of(ledger_row(1)), batch_max)


def test_the_same_events_give_the_same_message_again() -> None:
    rows = [ledger_row(n, "disputed" if n % 3 else "posted") for n in range(50)]
    first = unit_messages(events_of(*rows), 10)
    again = unit_messages(events_of(*rows), 10)  # a relay that died before marking them
    assert first == again
    assert all(m.message_id == message_id(m.event_ids) for m in first)


def test_the_message_id_is_its_events_ids_and_nothing_else() -> None:
    a, b, c = (event_id(f"{n:064x}", 1) for n in range(3))
    assert message_id([a, b]) == message_id([b, a])  # the events, not their order
    assert message_id([a, b]) != message_id([a, b, c])
    assert message_id([a]) != a  # a message is not one of its events
    assert len(message_id([a, b])) == 32 and int(message_id([a, b]), 16) >= 0


def test_every_event_keeps_its_ledger_rows_identity_and_wire_shape() -> None:
    row = ledger_row(7, "disputed")
    [message] = unit_messages(events_of(row), 1000)
    [body] = bodies(message)
    assert list(body) == [
        "event_id",
        "type",
        "kind",
        "job_id",
        "document_id",
        "line_ref",
        "partition_key",
        "reconciliation_key",
        "contract_version",
        "correlation_id",
        "amount",
        "claimed_amount",
        "delta",
        "occurred_at",
        "period",
    ]
    assert body["event_id"] == event_id(f"{7:064x}", 1)
    assert body["type"] == "settlement.disputed"
    assert (body["amount"], body["claimed_amount"], body["delta"]) == ("1.5000",) * 3
    assert body["occurred_at"] == OCCURRED and body["correlation_id"] is None


def test_amounts_read_as_text_go_out_unchanged() -> None:
    # PostgreSQL hands the relay NUMERIC(20,4) as its text: the wire form itself.
    row = list(ledger_row(1))
    for name in ("amount", "claimed_amount", "delta"):
        row[LEDGER_FIELDS.index(name)] = "-0.0100"
    as_text = bodies(unit_messages([event(tuple(row), OCCURRED)], 1000)[0])[0]
    row[LEDGER_FIELDS.index("amount")] = Decimal("-0.0100")
    as_decimal = bodies(unit_messages([event(tuple(row), OCCURRED)], 1000)[0])[0]
    assert as_text == as_decimal and as_text["amount"] == "-0.0100"


def test_a_resolution_adds_its_decision_note_and_dispute() -> None:
    row = list(ledger_row(9, "resolved"))
    row[LEDGER_FIELDS.index("supersedes_id")] = 4
    resolution = SimpleNamespace(decision="settle_at", note='split "it"\tnow')
    [message] = unit_messages([event(tuple(row), OCCURRED, resolution)], 1000)
    [body] = bodies(message)
    assert list(body)[-3:] == ["decision", "note", "supersedes_id"]
    assert (body["decision"], body["note"], body["supersedes_id"]) == (
        "settle_at",
        'split "it"\tnow',
        4,
    )
    assert body["event_id"] == event_id(f"{9:064x}", 1, "resolved")


def test_an_older_outbox_rows_event_travels_as_it_was_written() -> None:
    written = b'{"event_id":"e1","type":"settlement.posted","kind":"promo_accrual"}'
    message = encoded_message("e1", "settlement.posted.promo_accrual", written)
    assert json.loads(message.body) == {"events": [json.loads(written)]}
    assert message.count == 1 and message.message_id == message_id(["e1"])


@given(
    outcomes=st.lists(st.sampled_from(["posted", "disputed", "resolved"]), max_size=60),
    batch_max=st.integers(1, 7),
)
def test_batching_keeps_every_event_once_within_its_bounds(
    outcomes: list[str], batch_max: int
) -> None:
    rows = [ledger_row(n, outcome) for n, outcome in enumerate(outcomes)]
    messages = unit_messages(events_of(*rows), batch_max)
    seen = [e["event_id"] for m in messages for e in bodies(m)]
    assert sorted(seen) == sorted(event_id(r[1], 1, r[3]) for r in rows)
    assert all(1 <= m.count <= batch_max for m in messages)
    # At most one partly filled message per outcome (its last).
    for outcome in set(outcomes):
        sizes = [m.count for m in messages if m.routing_key.split(".")[1] == outcome]
        assert all(size == batch_max for size in sizes[:-1])


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.decimals(
        min_value=Decimal("-9999999999999999.9999"),
        max_value=Decimal("9999999999999999.9999"),
        places=4,
        allow_nan=False,
        allow_infinity=False,
    ).map(lambda d: d.normalize() if d else d)
)
def test_an_amount_reads_as_postgresql_gives_it_back_whoever_publishes(amount: Decimal) -> None:
    """The worker makes events from the Decimals it wrote, the relay from the
    NUMERIC(20,4) text PostgreSQL gives back: the same text, so the same bodies."""
    as_numeric_text = f"{amount:.4f}".replace("-0.0000", "0.0000")
    assert _wire(amount) == as_numeric_text
    assert _wire(as_numeric_text) == as_numeric_text
