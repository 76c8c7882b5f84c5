"""Ledger history for ``bench.run --ledger-rows N``: N rows of earlier quarters, by COPY.

The run measures whether settling a claim slows down as the ledger grows, so the
history must cost what real history costs: every row its own reconciliation key,
computed as settlement computes it (random hex, spread over the identity index),
written through the ledger's indexes as they stand (not built afterwards, which
would pack them tighter than rows arriving over years do). The rows are
``promo_accrual`` lines of the quarters before the run's (2026-Q2 back), from
history vendors ``HIST-nnnn`` that are none of the run's, so no row of the run
can meet one: 98% posted and 2% disputed like the run's, under contract version
1 (delta the amount, superseding nothing), in jobs of 500,000 lines and chunks
of 5,000 numbered and positioned as settlement numbers them.

What those rows reference is filled minimally: the contracts they settled under,
their jobs (completed: one ``chunk_results`` row per chunk, summing exactly to
the chunk's rows), ``job_partitions``, and where the rows are (a range a chunk
and one a document of it, as the ledger writer records them). Left out, as nothing the run does
reads them: chunk payloads, published outbox rows (the relay reads unpublished
ones, through a partial index) and ``line_outcomes`` (history has no duplicates
or noted lines). Then ``VACUUM (ANALYZE)``, as autovacuum would long since have
done to old quarters (it is off on the test server, and would otherwise start on
20M new rows during the run), and a ``CHECKPOINT``, so that the run does not pay
for writing the fill's pages out.

Every row is booked in a period (docs/architecture.md#booking-periods-and-the-close)
as the product books it. By default all of them in the open period the migration
made, as a ledger migrated to 0029 holds its rows. Asked for closed periods
(``periods``: a number, the rows split evenly, or each one's rows), the rows are
booked in consecutive id ranges, oldest first, in periods ``2025-01``, ``2025-02``
... written closed with their range (``after_id``, ``last_id``], then summed by the
product's own close (``periods/close.py::finalise``: ``period_balances`` carried
forward, totals, the journal's SHA-256), as a close would have summed each; the
rows after the last closed period, if any, are in the open one after it.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import random
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg

from bench.procstats import service_cpu
from shared.adapters.db.contracts import canonical_body
from shared.adapters.db.engine import make_engine
from shared.adapters.db.periods.close import finalise
from shared.domain import periods as period_rules
from shared.domain.keys import correlation_id_for, promo_key, promo_line_item_hash
from shared.domain.money import DEFAULT_CURRENCY
from shared.domain.pipeline.units import chunk_start
from tests.support.infra import PRODUCER_ID
from tests.support.workload import CONTRACT, RATES

KIND = "promo_accrual"
VENDORS = 200  # HIST-0000 ... HIST-0199, 50 to a job
JOB_VENDORS = 50
JOB_LINES = 500_000
CHUNK_LINES = 5_000
DOC_LINES = 20
JOBS_PER_QUARTER = 2
FIRST_LATER_QUARTER = (2026, 3)  # the run's period: history ends the quarter before
FORMATS = ("text", "binary")
FIRST_PERIOD = (2025, 1)  # the first closed period's month, when the fill closes some
BY = "bench"  # who closed them (the closed_by of an operator's token fingerprint)

LEDGER_COLUMNS = (
    "id, reconciliation_key, contract_version, kind, partition_key, document_id, line_ref,"
    " job_id, outcome, amount, claimed_amount, delta, supersedes_id, correlation_id,"
    " created_at, position, period"
)
LEDGER_TYPES = [
    "int8", "varchar", "int4", "varchar", "varchar", "varchar", "varchar",
    "varchar", "varchar", "numeric", "numeric", "numeric", "int8", "varchar",
    "timestamptz", "int8", "varchar",
]  # fmt: skip
# The tier rates in thousandths: a line's amount in cents is then exact integer
# arithmetic, rounded half up as settlement rounds it.
RATES_MILLI = {tier: int(rate * 1000) for tier, rate in RATES.items()}
assert all(RATES_MILLI[t] == rate * 1000 for t, rate in RATES.items())
TIERS = tuple(RATES_MILLI)


@dataclass
class Filled:
    """What the fill wrote and what it cost."""

    rows: int
    fmt: str
    jobs: int = 0
    chunks: int = 0
    copy_s: float = 0.0
    cpu_s: float = 0.0  # this process's CPU during the COPY: generating and encoding the rows
    server_cpu_s: float = 0.0  # PostgreSQL's (every backend's) over the same time
    vacuum_s: float = 0.0
    periods: list[tuple[str, int]] = field(default_factory=list)  # closed: (name, rows)
    open_period: str = ""
    open_rows: int = 0
    finalise_s: float = 0.0  # summing the closed periods (the product's close)
    before: dict[str, int] = field(default_factory=dict)  # bytes: total, heap, indexes
    after: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.rows / self.copy_s if self.copy_s else 0.0

    def mib_per_million(self, part: str = "total") -> float:
        grown = self.after[part] - self.before[part]
        return grown / 2**20 / (self.rows / 1e6) if self.rows else 0.0

    def report(self) -> str:
        grown = {p: (self.after[p] - self.before[p]) / 2**20 for p in self.after}
        return (
            f"ledger filled with {self.rows:,} rows of earlier quarters (jobs: {self.jobs},"
            f" chunks: {self.chunks}) by {self.fmt} COPY in {self.copy_s:.1f} s,"
            f" {self.rate:,.0f} rows/s (CPU µs a row: {self.cpu_s / self.rows * 1e6:.1f} here,"
            f" {self.server_cpu_s / self.rows * 1e6:.1f} PostgreSQL);"
            f" VACUUM (ANALYZE) + CHECKPOINT {self.vacuum_s:.1f} s\n"
            f"ledger on disk (table, its indexes and TOAST): {self.before['total'] / 2**20:.1f}"
            f" → {self.after['total'] / 2**20:.1f} MiB, {self.mib_per_million():.1f} MiB per"
            f" million rows (heap {self.mib_per_million('heap'):.1f},"
            f" indexes {self.mib_per_million('indexes'):.1f}); grew {grown['total']:.1f} MiB"
            + self._booked()
        )

    def _booked(self) -> str:
        if not self.periods:
            return f"\nevery row booked in the open period {self.open_period}"
        sizes = sorted({rows for _, rows in self.periods})
        return (
            f"\nbooked in {len(self.periods)} closed periods ({self.periods[0][0]} .."
            f" {self.periods[-1][0]}; {', '.join(f'{n:,}' for n in sizes)} rows each), summed"
            f" by the close in {self.finalise_s:.1f} s; {self.open_rows:,} rows in the open"
            f" period {self.open_period}"
        )


@dataclass
class Job:
    """One historical job, as its ``jobs`` row holds it."""

    id: str
    at: dt.datetime
    documents: int
    lines: int
    chunks: int


@dataclass
class Chunk:
    """One historical chunk's rows and the ``chunk_results`` row they sum to."""

    job_id: str
    chunk_id: str
    at: dt.datetime
    rows: list[tuple[Any, ...]]  # (id, key, partition, document, line_ref, outcome, cents...)
    posted: int = 0
    disputed: int = 0
    cents_posted: int = 0
    cents_disputed: int = 0


def quarter(back: int) -> tuple[str, dt.datetime]:
    """The period ``back`` + 1 quarters before the run's, and a moment after its end."""
    year, q = FIRST_LATER_QUARTER
    index = year * 4 + (q - 1) - (back + 1)
    year, q = divmod(index, 4)
    ends = dt.datetime(year + (q == 3), 1 + 3 * ((q + 1) % 4), 1, 9, tzinfo=dt.UTC)
    return f"{year}-Q{q + 1}", ends + dt.timedelta(days=10)


def cents_text(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


class History:
    """The historical jobs, generated deterministically chunk by chunk."""

    def __init__(self, rows: int, seed: int = 17) -> None:
        self.rows = rows
        self.rng = random.Random(seed)
        self.jobs: list[Job] = []
        self.partitions: list[tuple[str, str]] = []  # (job_id, partition_key)

    def _id(self) -> str:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4).hex

    def chunks(self) -> Iterator[Chunk]:
        job_count = -(-self.rows // JOB_LINES)
        next_id = 1
        for j in range(job_count):
            lines = min(JOB_LINES, self.rows - j * JOB_LINES)
            # Oldest first, so ids ascend with time as they do in a real ledger.
            period, at = quarter((job_count - 1 - j) // JOBS_PER_QUARTER)
            at += dt.timedelta(days=j % JOBS_PER_QUARTER)
            job_id = self._id()
            vendors = [f"HIST-{(j * JOB_VENDORS + v) % VENDORS:04d}" for v in range(JOB_VENDORS)]
            documents, seqs = -(-lines // DOC_LINES), -(-lines // CHUNK_LINES)
            self.jobs.append(Job(job_id, at, documents, lines, seqs))
            self.partitions += [(job_id, v) for v in sorted(set(vendors[:documents]))]
            for seq in range(seqs):
                first = seq * CHUNK_LINES
                count = min(CHUNK_LINES, lines - first)
                # A 500,000-line job settles in about 8 s: 80 ms a chunk.
                chunk_at = at + dt.timedelta(milliseconds=80 * seq)
                yield self._chunk(job_id, vendors, period, seq, first, count, next_id, chunk_at)
                next_id += count

    def _chunk(
        self,
        job_id: str,
        vendors: list[str],
        period: str,
        seq: int,
        first: int,
        count: int,
        next_id: int,
        at: dt.datetime,
    ) -> Chunk:
        rng = self.rng
        chunk = Chunk(job_id, self._id(), at, [])
        append = chunk.rows.append
        start = chunk_start(seq)
        document_id = correlation = partition = ""
        for n in range(first, first + count):
            doc, line_no = divmod(n, DOC_LINES)
            if line_no == 0 or not document_id:
                document_id = f"{period}-CLAIM-{doc:07d}"
                partition = vendors[doc % JOB_VENDORS]
                correlation = correlation_id_for(job_id, document_id)
            tier = TIERS[rng.randrange(3)]
            model = (rng.randrange(1, 500) * RATES_MILLI[tier] + 5) // 10
            sku = f"SKU-{rng.randrange(10**6):06d}"
            key = promo_key(
                partition,
                document_id,
                promo_line_item_hash(line_no + 1, sku, None, None),
                tier,
                period,
            )
            if rng.random() < 0.02:
                outcome, claimed = "disputed", model + 100
                chunk.disputed += 1
                chunk.cents_disputed += claimed
            else:
                outcome, claimed = "posted", model
                chunk.posted += 1
                chunk.cents_posted += model
            append(
                (
                    next_id + n - first,
                    key,
                    partition,
                    document_id,
                    str(line_no + 1),
                    outcome,
                    model,
                    claimed,
                    correlation,
                    start + n - first,
                )
            )
        return chunk


@dataclass
class Booking:
    """Which period each row is booked in: the closed periods' consecutive id
    ranges, oldest first, then the open period's."""

    names: list[str]  # the closed periods', then the open one's
    last_ids: list[int]  # each closed period's last id (the open one has none)
    at: list[dt.datetime] = field(default_factory=list)  # each closed period's last row's time

    @classmethod
    def of(cls, sizes: Sequence[int], open_name: str) -> Booking:
        names = [period_name(n) for n in range(len(sizes))] if sizes else []
        last_ids, last = [], 0
        for size in sizes:
            last += size
            last_ids.append(last)
        return cls([*names, open_name], last_ids)

    def first(self, row_id: int) -> int:
        """The index of the period row ``row_id`` is booked in."""
        return bisect.bisect_left(self.last_ids, row_id)

    def end(self, index: int) -> int:
        """The last id of period ``index`` (the open one: none)."""
        return self.last_ids[index] if index < len(self.last_ids) else 2**63

    def note(self, chunk: Chunk) -> None:
        """The times of the closed periods' last rows in ``chunk``."""
        if not chunk.rows:
            return
        first, last = chunk.rows[0][0], chunk.rows[-1][0]
        while len(self.at) < len(self.last_ids) and first <= self.last_ids[len(self.at)] <= last:
            self.at.append(chunk.at)


def period_name(n: int) -> str:
    """The ``n``-th closed period's name: months from ``FIRST_PERIOD``."""
    year, month = divmod(FIRST_PERIOD[0] * 12 + FIRST_PERIOD[1] - 1 + n, 12)
    return f"{year:04d}-{month + 1:02d}"


def period_sizes(rows: int, periods: int | Sequence[int]) -> list[int]:
    """The closed periods' rows: ``periods`` of them splitting ``rows`` evenly (the
    first ones a row more), or as given (their sum at most ``rows``: the rest
    is the open period's)."""
    if isinstance(periods, int):
        if periods < 0 or periods > rows:
            raise ValueError(f"{periods} closed periods of {rows} rows")
        size, more = divmod(rows, periods) if periods else (0, 0)
        return [size + (n < more) for n in range(periods)]
    sizes = list(periods)
    if any(n <= 0 for n in sizes) or sum(sizes) > rows:
        raise ValueError(f"closed periods of {sizes} rows from {rows} rows")
    return sizes


class TextRows:
    """PostgreSQL's text COPY format, a chunk at a time."""

    sql = f"COPY ledger_entries ({LEDGER_COLUMNS}) FROM STDIN"

    def __init__(self, booking: Booking) -> None:
        self.amounts: dict[int, str] = {}
        self.booking = booking

    def write(self, copy: psycopg.Copy, chunk: Chunk) -> None:
        amounts, booking = self.amounts, self.booking
        ts = chunk.at.isoformat()
        mid = f"\t{chunk.job_id}\t"
        out = []
        index = booking.first(chunk.rows[0][0]) if chunk.rows else 0
        end, period = booking.end(index), booking.names[index]
        for id_, key, partition, doc, ref, outcome, model, claimed, corr, position in chunk.rows:
            if id_ > end:
                index += 1
                end, period = booking.end(index), booking.names[index]
            a = amounts.get(model) or amounts.setdefault(model, cents_text(model))
            c = amounts.get(claimed) or amounts.setdefault(claimed, cents_text(claimed))
            out.append(
                f"{id_}\t{key}\t1\t{KIND}\t{partition}\t{doc}\t{ref}{mid}{outcome}\t{a}\t{c}"
                f"\t{a}\t\\N\t{corr}\t{ts}\t{position}\t{period}\n"
            )
        copy.write("".join(out).encode())


class BinaryRows:
    """PostgreSQL's binary COPY format, row by row through psycopg's dumpers."""

    sql = f"COPY ledger_entries ({LEDGER_COLUMNS}) FROM STDIN (FORMAT BINARY)"

    def __init__(self, booking: Booking) -> None:
        self.amounts: dict[int, Decimal] = {}
        self.booking = booking

    def write(self, copy: psycopg.Copy, chunk: Chunk) -> None:
        amounts, booking = self.amounts, self.booking
        at, job_id = chunk.at, chunk.job_id
        write_row = copy.write_row
        index = booking.first(chunk.rows[0][0]) if chunk.rows else 0
        end, period = booking.end(index), booking.names[index]
        for id_, key, partition, doc, ref, outcome, model, claimed, corr, position in chunk.rows:
            if id_ > end:
                index += 1
                end, period = booking.end(index), booking.names[index]
            a = amounts.get(model) or amounts.setdefault(model, Decimal(cents_text(model)))
            c = amounts.get(claimed) or amounts.setdefault(claimed, Decimal(cents_text(claimed)))
            write_row(
                (
                    id_,
                    key,
                    1,
                    KIND,
                    partition,
                    doc,
                    ref,
                    job_id,
                    outcome,
                    a,
                    c,
                    a,
                    None,
                    corr,
                    at,
                    position,
                    period,
                )
            )


def ledger_size(conn: psycopg.Connection) -> dict[str, int]:
    total, heap, indexes = conn.execute(
        "SELECT pg_total_relation_size('ledger_entries'), pg_relation_size('ledger_entries'),"
        " pg_indexes_size('ledger_entries')"
    ).fetchone()  # type: ignore[misc]
    return {"total": total, "heap": heap, "indexes": indexes}


def fill(
    url: str, rows: int, fmt: str = "text", seed: int = 17, periods: int | Sequence[int] = 0
) -> Filled:
    """Fill the (empty) ledger of ``url`` with ``rows`` historical rows, booked
    in the open period, or in ``periods`` closed periods and then the open one
    (a number of them, or each one's rows: see the module's docstring)."""
    sizes = period_sizes(rows, periods)
    history = History(rows, seed)
    filled = Filled(rows, fmt)
    with psycopg.connect(url, autocommit=True) as conn:
        # The rows take ids from 1: a ledger already holding some would refuse them.
        if conn.execute("SELECT EXISTS (SELECT 1 FROM ledger_entries)").fetchone() == (True,):
            raise RuntimeError("the ledger must be empty before it is filled")
        first = conn.execute("SELECT name FROM periods WHERE status = 'open'").fetchone()
        if first is None or conn.execute("SELECT count(*) FROM periods").fetchone() != (1,):
            raise RuntimeError("the ledger must have its first period only: a fresh migrate")
        booking = Booking.of(sizes, period_name(len(sizes)) if sizes else first[0])
        writer = TextRows(booking) if fmt == "text" else BinaryRows(booking)
        filled.before = ledger_size(conn)
        started, cpu, server = time.monotonic(), time.process_time(), service_cpu()["postgres"]
        results: list[tuple[Any, ...]] = []
        job_ranges: list[tuple[Any, ...]] = []
        document_ranges: list[tuple[Any, ...]] = []
        with conn.transaction(), conn.cursor().copy(writer.sql) as copy:
            if fmt == "binary":
                copy.set_types(LEDGER_TYPES)
            for chunk in history.chunks():
                writer.write(copy, chunk)
                booking.note(chunk)
                results.append(chunk_result(chunk))
                chunk_ranges(chunk, job_ranges, document_ranges)
                chunk.rows = []
        with conn.transaction():
            conn.execute(
                "SELECT setval(pg_get_serial_sequence('ledger_entries', 'id'), %s)", (rows,)
            )
            references(conn, history, results, job_ranges, document_ranges)
            if sizes:
                book_periods(conn, booking, history.jobs[0].at)
        filled.copy_s = time.monotonic() - started
        filled.cpu_s = time.process_time() - cpu
        filled.server_cpu_s = service_cpu()["postgres"] - server
        filled.jobs, filled.chunks = len(history.jobs), len(results)
        filled.periods = list(zip(booking.names, sizes, strict=False))
        filled.open_period, filled.open_rows = booking.names[-1], rows - sum(sizes)
        started = time.monotonic()
        conn.execute("VACUUM (ANALYZE)")
        filled.vacuum_s = time.monotonic() - started
        if sizes:
            # Summed as each close would have summed its period, in order (each
            # carries the one before forward), on the analysed ledger.
            started = time.monotonic()
            engine = make_engine(url)
            try:
                for name in booking.names[:-1]:
                    finalise(engine, name, period_rules.Journaling())
            finally:
                engine.dispose()
            filled.finalise_s = time.monotonic() - started
            conn.execute("VACUUM (ANALYZE) periods, period_balances, outbox")
        started = time.monotonic()
        conn.execute("CHECKPOINT")
        filled.vacuum_s += time.monotonic() - started
        filled.after = ledger_size(conn)
    return filled


def book_periods(conn: psycopg.Connection, booking: Booking, oldest: dt.datetime) -> None:
    """The periods the rows are booked in: the migration's open one replaced by
    the closed ones, each with its id range and closed just after its last row,
    then the open one after them (summed later: ``finalise``)."""
    conn.execute("DELETE FROM periods")
    opened, after = oldest - dt.timedelta(days=1), 0
    closed_ones = len(booking.last_ids)
    for seq, (name, last_id, at) in enumerate(
        zip(booking.names[:-1], booking.last_ids, booking.at, strict=True), 1
    ):
        # Just after its last row (and after the period before: a job's time is
        # its quarter's, and two jobs of a quarter may come in either order).
        closed = max(at, opened) + dt.timedelta(milliseconds=40)
        conn.execute(
            "INSERT INTO periods (name, seq, status, opened_at, after_id, closed_at, closed_by,"
            " note, next, last_id) VALUES (%s, %s, 'closed', %s, %s, %s, %s, %s, %s, %s)",
            (name, seq, opened, after, closed, BY, "bench history", booking.names[seq], last_id),
        )
        opened, after = closed, last_id
    conn.execute(
        "INSERT INTO periods (name, seq, status, opened_at, after_id)"
        " VALUES (%s, %s, 'open', %s, %s)",
        (booking.names[-1], closed_ones + 1, opened, after),
    )


def chunk_result(chunk: Chunk) -> tuple[Any, ...]:
    return (
        chunk.chunk_id,
        chunk.job_id,
        "chunk",
        chunk.posted,
        chunk.disputed,
        0,
        0,
        cents_text(chunk.cents_posted),
        cents_text(chunk.cents_disputed),
        chunk.at,
    )


def chunk_ranges(
    chunk: Chunk, jobs: list[tuple[Any, ...]], documents: list[tuple[Any, ...]]
) -> None:
    """Where the chunk's rows are, as the ledger writer records a unit's
    (ledger/ranges.py): its job's range, and each document's."""
    rows = chunk.rows
    first, last = rows[0], rows[-1]
    jobs.append((chunk.job_id, first[0], last[0], first[-1], last[-1], 0))
    start = 0
    for n in range(1, len(rows) + 1):
        if n == len(rows) or rows[n][3] != rows[start][3]:
            documents.append((rows[start][3], rows[start][2], rows[start][0], rows[n - 1][0]))
            start = n


def references(
    conn: psycopg.Connection,
    history: History,
    results: list[tuple[Any, ...]],
    job_ranges: list[tuple[Any, ...]],
    document_ranges: list[tuple[Any, ...]],
) -> None:
    """What the history's rows name: contracts, jobs, their partitions and chunk
    results; and where they are (the ledger's ranges)."""
    body = canonical_body(CONTRACT)
    digest = hashlib.sha256(body.encode()).hexdigest()
    oldest = history.jobs[0].at - dt.timedelta(days=30)
    contracts = [
        (KIND, f"HIST-{v:04d}", 1, body, digest, oldest, DEFAULT_CURRENCY) for v in range(VENDORS)
    ]
    # Posted without an Idempotency-Key, a job is keyed by its body's digest: a
    # digest of its id stands in for both (no repeat of these bodies will come).
    digests = {j.id: hashlib.sha256(j.id.encode()).hexdigest() for j in history.jobs}
    jobs = [
        (j.id, PRODUCER_ID, digests[j.id], digests[j.id], KIND, "accepted", j.documents, j.lines)
        + (j.chunks, j.at, "ndjson")
        for j in history.jobs
    ]
    tables: dict[str, Sequence[tuple[Any, ...]]] = {
        "contracts (kind, partition_key, version, body, body_sha256, created_at, currency)": (
            contracts
        ),
        "jobs (id, key_id, idempotency_key, body_sha256, kind, state, documents, lines,"
        " chunks_total, created_at, source_format)": jobs,
        "job_partitions (job_id, partition_key)": history.partitions,
        "chunk_results (chunk_id, job_id, source, posted, disputed, duplicate, dead_lettered,"
        " amount_posted, amount_disputed, created_at)": results,
        "ledger_job_ranges (job_id, first_id, last_id, first_position, last_position,"
        " unpositioned)": job_ranges,
        "ledger_document_ranges (document_id, partition_key, first_id, last_id)": (document_ranges),
    }
    cursor = conn.cursor()
    for target, rows in tables.items():
        with cursor.copy(f"COPY {target} FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
