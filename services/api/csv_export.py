"""The one CSV writer: every export settleq answers (disputes, a job's lines,
dead letters) is written here, for the spreadsheet finance works in
(docs/api.md#csv-exports).

The header row comes first; quoting is RFC 4180 with CRLF line ends (the csv
module's excel dialect). A cell's type says how it is written:

- text (``str``) is neutralised: a cell a spreadsheet would run as a formula
  (starting with ``=``, ``+``, ``-``, ``@``, tab or CR) gets a leading ``'``,
  so ``=HYPERLINK(...)`` from a producer's document id reads as text;
- a number (``Decimal``, ``int``) is written plain, never with an exponent or
  as a negative zero, and never prefixed: a negative variance stays ``-2.50``,
  a number the spreadsheet can sum (amounts at their kind's quantum: ``amount``);
- ``None`` is an empty cell.

Rows are turned into text ``ROWS_PER_CHUNK`` at a time in a worker thread
(the database reads block), so an export never holds more than a chunk.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from shared.domain.money import at_quantum
from shared.wire.cells import FORMULA_START, Cell, cell

ROWS_PER_CHUNK = 1000
MEDIA_TYPE = "text/csv; charset=utf-8"
# A list route's 200 that ``Accept: text/csv`` turns into an export (openapi.yaml).
RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A page; with `Accept: text/csv`, every matching item as CSV (header"
        " row first, `limit` and `cursor` ignored), streamed.",
        "content": {"text/csv": {"schema": {"type": "string"}}},
    }
}
_FORMULA_FIRST = frozenset(FORMULA_START)


def wanted(request: Request) -> bool:
    """Whether the client asked for CSV (``Accept: text/csv``, among others)."""
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip().lower() == "text/csv" for part in accept.split(","))


def amount(value: Decimal | None, quantum: Decimal) -> Decimal | None:
    """An amount's cell value: at its kind's quantum, never rounded
    (``shared.domain.money.at_quantum``)."""
    return None if value is None else at_quantum(value, quantum)


def chunks(
    header: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    rows_per_chunk: int | None = None,
) -> Generator[str, None, None]:
    """The CSV text: the header row, then ``rows_per_chunk`` (by default
    ``ROWS_PER_CHUNK``) rows per chunk."""
    rows_per_chunk = rows_per_chunk or ROWS_PER_CHUNK
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    count = 0
    first = _FORMULA_FIRST
    for row in rows:
        # ``cell`` inlined for the common cells (the csv module writes None as
        # an empty cell and an int as its digits): a call per cell would cost
        # as much as the rest of the export.
        writer.writerow(
            [
                ("'" + v if v and v[0] in first else v)
                if type(v) is str
                else v
                if v is None or type(v) is int
                else cell(v)
                for v in row
            ]
        )
        count += 1
        if count == rows_per_chunk:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
            count = 0
    yield buffer.getvalue()


async def in_threads(source: Iterator[Any]) -> AsyncIterator[Any]:
    """Each chunk made in a worker thread; the source is closed (its cursor
    released) however the response ends."""
    try:
        while True:
            chunk = await run_in_threadpool(next, source, None)
            if chunk is None:
                return
            yield chunk
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            await run_in_threadpool(close)


async def response(source: Iterator[Any], filename: str) -> StreamingResponse:
    """``source`` (text, or bytes already encoded) streamed as a CSV download
    named ``filename``. Its first chunk
    is made before the answer starts: a database that is down is still a 503,
    not a 200 cut short."""
    first = await run_in_threadpool(next, source)

    async def body() -> AsyncIterator[Any]:
        try:
            yield first
            async for chunk in in_threads(source):
                yield chunk
        finally:  # also when the client left before the second chunk
            close = getattr(source, "close", None)
            if close is not None:
                await run_in_threadpool(close)

    return StreamingResponse(
        body(),
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
