"""``settleq events tail`` prints the events inside each message, one a line
(services/commands/intake/events.py)."""

from __future__ import annotations

import json

from services.commands.intake.events import message_lines

EVENTS = [
    {
        "event_id": f"e{n}",
        "type": "settlement.posted",
        "kind": "promo_accrual",
        "partition_key": "VENDOR-1",
        "document_id": "DOC-1",
        "line_ref": str(n),
        "amount": "1.5000",
        "job_id": "job-1",
        "occurred_at": "2026-12-01T12:00:00Z",
        "note": "café",
    }
    for n in (1, 2, 3)
]
BODY = json.dumps({"events": EVENTS}, ensure_ascii=False).encode()


def test_each_event_of_a_message_is_one_line() -> None:
    lines = message_lines(BODY, as_json=False)
    assert len(lines) == 3
    assert lines[0] == (
        "2026-12-01T12:00:00Z settlement.posted promo_accrual VENDOR-1 DOC-1/1 1.50 job job-1"
    )
    assert [line.split()[4] for line in lines] == ["DOC-1/1", "DOC-1/2", "DOC-1/3"]


def test_json_prints_each_event_as_sent() -> None:
    lines = message_lines(BODY, as_json=True)
    assert [json.loads(line) for line in lines] == EVENTS
    assert "café" in lines[0] and " " not in lines[0].replace("café", "")


def test_a_body_that_is_no_batch_is_printed_as_it_came() -> None:
    for body in (b"not json", b'{"event_id": "e1"}', b'{"events": "x"}', b'{"events": [1]}'):
        assert message_lines(body, as_json=False) == [body.decode()]
