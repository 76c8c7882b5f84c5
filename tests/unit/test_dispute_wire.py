"""The dispute queue's wire forms without a database (docs/api.md#disputes): the
CSV finance opens in a spreadsheet, the JSON shape, and how a resolution
request is judged before it reaches the ledger."""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import io
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request

from services.api import csv_export
from services.api.disputes import export as dispute_csv
from services.api.disputes import schemas as wire
from services.api.disputes.routes import _opened_before, _request
from services.api.errors import ApiError
from shared.adapters.db.disputes.queue import Dispute, Resolution, Stats, Totals
from shared.adapters.db.remittances.queue import Waiting
from shared.domain.money import plain
from shared.wire import disputes as shared_wire

OPENED = dt.datetime(2026, 11, 30, 9, 15, 0, 123456)  # naive, as SQLite returns it


def dispute(**changes: object) -> Dispute:
    fields: dict[str, object] = {
        "id": 7,
        "ledger_entry_id": 7,
        "kind": "promo_accrual",
        "partition_key": "V-1",
        "job_id": "j" * 32,
        "document_id": 'INV-"1", with comma',
        "line_ref": "2",
        "reconciliation_key": "ab" * 32,
        "contract_version": 1,
        "claimed_amount": Decimal("1E+3"),
        "model_amount": Decimal("999.0000"),
        "variance": Decimal("1.0000"),
        "status": "open",
        "opened_at": OPENED,
        "resolution": None,
    }
    fields.update(changes)
    return Dispute(**fields)  # type: ignore[arg-type]


RESOLUTION = Resolution(
    decision="settle_at",
    amount=Decimal("-0.00"),
    note="line one\nline two",
    resolved_at=dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC),
    resolved_by="operator:0123456789ab",
    ledger_entry_id=91,
)


def parse(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("1E+3"), "1000"),
        (Decimal("-0"), "0"),
        (Decimal("-0.0000"), "0.0000"),
        (Decimal("1.5E-7"), "0.00000015"),
        (Decimal("-12.3400"), "-12.3400"),
        (Decimal("999999999999.9999"), "999999999999.9999"),
    ],
)
def test_amounts_are_plain_decimals(value: Decimal, text: str) -> None:
    assert plain(value) == text


def test_csv_header_is_stable_and_first() -> None:
    [header] = parse("".join(dispute_csv.chunks([])))
    # Columns are only ever added at the end: a spreadsheet's formulas keep working.
    assert header[:13] == [
        "id",
        "kind",
        "partition_key",
        "job_id",
        "document_id",
        "line_ref",
        "reconciliation_key",
        "contract_version",
        "claimed_amount",
        "model_amount",
        "variance",
        "status",
        "opened_at",
    ]
    assert header[13:] == [
        "decision",
        "decided_amount",
        "note",
        "resolved_at",
        "resolved_by",
        "resolution_ledger_entry_id",
    ]


def test_csv_rows_quote_times_and_amounts() -> None:
    resolved = dispute(id=8, ledger_entry_id=8, status="resolved", resolution=RESOLUTION)
    text = "".join(dispute_csv.chunks([dispute(), resolved]))
    assert "\r\n" in text  # RFC 4180 line ends
    header, open_row, resolved_row = parse(text)
    assert len(open_row) == len(resolved_row) == len(header)
    row = dict(zip(header, open_row, strict=True))
    assert row["document_id"] == 'INV-"1", with comma'
    assert '"INV-""1"", with comma"' in text
    # At the kind's quantum, as everywhere amounts are shown (promo: 0.01).
    assert row["claimed_amount"] == "1000.00" and row["model_amount"] == "999.00"
    assert row["opened_at"] == "2026-11-30T09:15:00.123456Z"
    assert all(row[c] == "" for c in dispute_csv.HEADER[13:])
    done = dict(zip(header, resolved_row, strict=True))
    assert done["decided_amount"] == "0.00" and done["note"] == "line one\nline two"
    assert done["resolved_at"] == "2026-12-01T08:00:00Z"
    assert done["resolution_ledger_entry_id"] == "91"
    assert "E+" not in text and "e+" not in text


def test_csv_comes_in_chunks_never_all_at_once() -> None:
    made = 0

    def source() -> object:
        nonlocal made
        for i in range(1, 26):
            made += 1
            yield dispute(id=i, ledger_entry_id=i)

    chunks = dispute_csv.chunks(source(), rows_per_chunk=10)  # type: ignore[arg-type]
    first = next(chunks)
    assert made == 10 and len(parse(first)) == 11  # the header and ten rows
    rest = list(chunks)
    assert made == 25 and [len(parse(c)) for c in rest] == [10, 5]


def test_the_async_stream_closes_its_source() -> None:
    closed: list[bool] = []

    def source() -> object:
        try:
            yield "a"
            yield "b"
        finally:
            closed.append(True)

    async def take_one() -> str:
        stream = csv_export.in_threads(source())  # type: ignore[arg-type]
        first = await stream.__anext__()
        await stream.aclose()  # the client went away
        return first

    assert asyncio.run(take_one()) == "a" and closed == [True]


def test_json_shape_has_every_field_with_strings_for_money() -> None:
    body = shared_wire.dispute(dispute(status="resolved", resolution=RESOLUTION)).model_dump()
    assert list(body) == [
        "id",
        "ledger_entry_id",
        "kind",
        "partition_key",
        "job_id",
        "document_id",
        "line_ref",
        "reconciliation_key",
        "contract_version",
        "claimed_amount",
        "model_amount",
        "variance",
        "status",
        "opened_at",
        "resolution",
    ]
    # At the kind's quantum, as everywhere amounts are shown (promo: 0.01).
    assert body["claimed_amount"] == "1000.00" and body["model_amount"] == "999.00"
    assert body["opened_at"] == "2026-11-30T09:15:00.123456Z"
    assert body["resolution"] == {
        "decision": "settle_at",
        "amount": "0.00",
        "note": "line one\nline two",
        "resolved_at": "2026-12-01T08:00:00Z",
        "resolved_by": "operator:0123456789ab",
        "ledger_entry_id": 91,
    }
    assert shared_wire.dispute(dispute()).model_dump()["resolution"] is None


def test_stats_are_the_stats_fields_with_strings() -> None:
    s = Stats(
        totals=[Totals("open", "promo_accrual", 2, Decimal(3), Decimal(1), Decimal(2), Decimal(2))],
        top_partitions=[],
        oldest_open_at=None,
    )
    waiting = Waiting(1, Decimal("9"), 0, dt.date(2026, 12, 31))
    assert wire.stats(s, waiting).model_dump() == {
        "deductions": {
            "open_count": 1,
            "open_amount": "9.00",
            "past_window": 0,
            "oldest_due_on": "2026-12-31",
        },
        "totals": [
            {
                "status": "open",
                "kind": "promo_accrual",
                "count": 2,
                "claimed": "3.00",
                "model": "1.00",
                "variance": "2.00",
                "abs_variance": "2.00",
            }
        ],
        "top_partitions": [],
        "oldest_open_at": None,
    }


@pytest.mark.parametrize(
    ("decision", "note", "amount", "code"),
    [
        ("settle_at", "ok", None, "amount_required"),
        ("accept_claim", "ok", Decimal(1), "amount_not_allowed"),
        ("accept_model", "  \t", None, "note_required"),
    ],
)
def test_a_resolution_request_is_judged_first(
    decision: str, note: str, amount: Decimal | None, code: str
) -> None:
    with pytest.raises(ApiError) as refused:
        _request(decision, note, amount)
    assert (refused.value.status, refused.value.code) == (422, code)


def test_a_good_resolution_request() -> None:
    assert _request("settle_at", "agreed on the phone", Decimal("5.5")).amount == Decimal("5.5")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T00:00:00Z", dt.datetime(2026, 12, 1, tzinfo=dt.UTC)),
        ("2026-12-01T01:00:00+01:00", dt.datetime(2026, 12, 1, tzinfo=dt.UTC)),
        ("2026-12-01", dt.datetime(2026, 12, 1, tzinfo=dt.UTC)),
    ],
)
def test_opened_before_is_read_as_utc(text: str, expected: dt.datetime) -> None:
    assert _opened_before(text) == expected


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "", "1764547200"])
def test_opened_before_that_is_not_a_time_is_422(text: str) -> None:
    with pytest.raises(ApiError) as refused:
        _opened_before(text)
    assert (refused.value.status, refused.value.code) == (422, "invalid_datetime")


@given(
    local=st.datetimes(min_value=dt.datetime.min, max_value=dt.datetime.max),
    minutes=st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1),
)
def test_opened_before_is_the_same_instant_or_422_over_the_whole_calendar(
    local: dt.datetime, minutes: int
) -> None:
    zone = dt.timezone(dt.timedelta(minutes=minutes))
    try:
        read = _opened_before(local.replace(tzinfo=zone).isoformat())
    except ApiError as refused:
        # Only an instant outside 0001-9999 once in UTC is refused.
        assert (refused.status, refused.code) == (422, "invalid_datetime")
        with pytest.raises(OverflowError):
            local.replace(tzinfo=zone).astimezone(dt.UTC)
        return
    assert read == local.replace(tzinfo=zone) and read is not None and read.tzinfo == dt.UTC


@pytest.mark.parametrize(
    ("accept", "csv_wanted"),
    [
        ("text/csv", True),
        ("application/json, text/csv;q=0.9", True),
        ("TEXT/CSV; charset=utf-8", True),
        ("application/json", False),
        ("*/*", False),
        ("", False),
    ],
)
def test_csv_is_asked_for_by_accept(accept: str, csv_wanted: bool) -> None:
    headers = [(b"accept", accept.encode())] if accept else []
    request = Request({"type": "http", "headers": headers, "method": "GET", "path": "/"})
    assert csv_export.wanted(request) is csv_wanted
