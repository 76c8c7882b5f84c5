"""What booking periods cost on a large ledger (docs/api.md#periods-and-the-close):
on the bench's tuned PostgreSQL, the ledger filled with ``--ledger-rows`` rows of
history (``bench/ledger_fill.py``, default 20,000,000) booked in ``--periods``
closed periods (default 12) and the open one, each closed period summed by the
product's close. The closed period in the middle has ``--journal-period-rows``
rows (default 2,000,000); the other closed periods and the open one share the
rest evenly (``--open-period-rows`` sets the open one's). Then, against a real
API process (``settleq api``):

- a partition's balance in a closed period (``GET /v1/balances?period=&partition_key=``),
  ``--balances`` times for a period and a partition drawn at random: median and
  p95 (target: p95 50 ms); and in the open period (reported, no target);
- the middle period's journal (``GET /v1/periods/{P}/journal?format=csv``):
  its time (target: 10 s), its bytes checked against the close's SHA-256;
- its journal lines streamed (``GET /v1/periods/{P}/journal/lines?format=csv``):
  rows a second (target: 50,000) and the API process's peak resident memory
  while it streams (target: 300 MiB);
- the open period's close (``POST /admin/periods/close``) while ``--writers``
  threads commit units through the product's ledger writer: the time to its
  answer (target: 5 s), how long a unit's commit waited, and that every unit
  landed whole on one side of the cut.

Each figure is printed with its target and the ratio of the two; ``--plan``
adds PostgreSQL's plans (EXPLAIN ANALYZE) of the statements the balances, the
lines and the close's sums run.

    python -m bench.periods [--ledger-rows 20000000] [--periods 12]
        [--journal-period-rows 2000000] [--balances 100] [--writers 2] [--plan]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Self

import httpx
from sqlalchemy import Engine, event, select, text

from bench.ledger_fill import fill, period_sizes
from bench.procstats import descendants, process_stats
from bench.server import describe, server
from shared.adapters.db.engine import make_engine
from shared.adapters.db.periods import close as closing
from shared.adapters.db.periods import reads, sums
from shared.adapters.db.periods.tables import periods
from shared.config.settings import Settings
from shared.domain import periods as domain
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.settlement import plan_chunk
from shared.domain.pipeline.units import ChunkRef
from tests.support.factories import promo_doc, promo_line, store_job
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, isolated_env
from tests.support.ledger import commit_plan
from tests.support.stack import Stack

BALANCE_TARGET_MS = 50.0
JOURNAL_TARGET_S = 10.0
LINES_TARGET_ROWS_S = 50_000.0
RSS_TARGET_MIB = 300.0
CLOSE_TARGET_S = 5.0
VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
KIND = get_kind("promo_accrual")
WRITER_VENDORS = 20  # CLOSE-W00 ... : none of the history's
UNIT_LINES = 100
CONTRACT = PromoContract.model_validate(
    {"tier_rates": {"T1": "0.125", "T2": "0.45"}, "tolerance": "0.05"}
)


@dataclass
class Figure:
    """One measured figure and its target: a ceiling, or a floor (``floor``)."""

    name: str
    value: float
    unit: str
    target: float | None
    floor: bool = False

    @property
    def ratio(self) -> float | None:
        return None if self.target is None else self.value / self.target

    @property
    def met(self) -> bool:
        if self.target is None:
            return True
        return self.value >= self.target if self.floor else self.value <= self.target

    def line(self) -> str:
        places = 2 if abs(self.value) < 10 else 1  # a journal's 0.02 s is not 0.0 s
        measured = f"{self.value:,.{places}f} {self.unit}"
        if self.target is None:
            return f"{self.name:44} {measured:>16}   (no target)"
        sign = ">=" if self.floor else "<="
        target = f"{sign} {self.target:,.0f} {self.unit}"
        verdict = "ok" if self.met else "MISSED"
        ratio = f"{self.ratio:5.2f}"
        return f"{self.name:44} {measured:>16}   target {target:>18}   ratio {ratio}  {verdict}"


def layout(
    rows: int, closed: int, journal_rows: int, open_rows: int | None
) -> tuple[list[int], int]:
    """The closed periods' rows, and the index of the measured one (the middle):
    it has ``journal_rows``; the other closed ones and the open one share the
    rest evenly, or the open one has ``open_rows`` and they the rest."""
    if closed < 1 or journal_rows < 1 or journal_rows > rows:
        raise ValueError("at least one closed period, of at most the ledger's rows")
    rest = rows - journal_rows
    if open_rows is None:
        open_rows = rest - (rest // closed) * (closed - 1)
    if not 0 <= open_rows <= rest:
        raise ValueError(f"an open period of {open_rows} rows in {rows}")
    others = period_sizes(rest - open_rows, closed - 1)
    if closed > 1 and min(others) < 1:
        raise ValueError(f"{closed - 1} closed periods in {rest - open_rows} rows")
    middle = closed // 2
    return [*others[:middle], journal_rows, *others[middle:]], middle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledger-rows", type=int, default=20_000_000)
    parser.add_argument("--periods", type=int, default=12, help="closed periods")
    parser.add_argument("--journal-period-rows", type=int, default=2_000_000)
    parser.add_argument("--open-period-rows", type=int, default=None)
    parser.add_argument("--balances", type=int, default=100)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--postgres", choices=("tuned", "stock", "machine"), default="tuned")
    parser.add_argument("--plan", action="store_true", help="EXPLAIN ANALYZE the reads")
    args = parser.parse_args()
    sizes, middle = layout(
        args.ledger_rows, args.periods, args.journal_period_rows, args.open_period_rows
    )
    figures: list[Figure] = []
    with server(args.postgres) as admin:
        print(describe(args.postgres, admin))
        with isolated_env("periods", admin) as env:
            started = time.monotonic()
            filled = fill(env.database_url, args.ledger_rows, periods=sizes)
            print(filled.report())
            print(f"filled in {time.monotonic() - started:.0f} s")
            measured = filled.periods[middle][0]
            engine = make_engine(env.database_url)
            try:
                with tempfile.TemporaryDirectory() as logs:
                    stack = Stack(env, Path(logs))
                    stack.start_api()
                    try:
                        http = httpx.Client(base_url=stack.url, timeout=600)
                        figures += balances(http, engine, args.balances)
                        figures += journal(http, engine, measured)
                        figures += lines(http, stack, measured, args.journal_period_rows)
                        if args.plan:
                            plans(engine, measured)
                        figures += close_under_load(http, engine, args.writers)
                        http.close()
                    finally:
                        stack.stop()
            finally:
                engine.dispose()
    print("\nfigure                                               measured")
    for figure in figures:
        print(figure.line())
    return 0 if all(f.met for f in figures) else 1


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * p) - 1)]


def balances(http: httpx.Client, engine: Engine, count: int) -> list[Figure]:
    """A partition's balance in a closed period drawn at random, and in the open one."""
    # A partition has a balance in a closed period from its first row on (carried
    # forward after): draw among the pairs that exist; the open period carries
    # every partition of the last closed one.
    with engine.connect() as conn:
        pairs = conn.execute(text("SELECT period, partition_key FROM period_balances")).all()
        last = (
            conn.execute(
                text(
                    "SELECT partition_key FROM period_balances WHERE period ="
                    " (SELECT name FROM periods WHERE status = 'closed' ORDER BY seq DESC LIMIT 1)"
                )
            )
            .scalars()
            .all()
        )
    rng = random.Random(11)
    http.get("/v1/balances", params={"partition_key": last[0]}, headers=VIEWER)
    figures = []
    for label, named in (("closed period", True), ("open period", False)):
        times = []
        for _ in range(count):
            if named:
                period, partition = rng.choice(pairs)
                params = {"partition_key": partition, "period": period}
            else:
                params = {"partition_key": rng.choice(last)}
            started = time.perf_counter()
            answer = http.get("/v1/balances", params=params, headers=VIEWER)
            times.append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            assert len(answer.json()["items"]) == 1, answer.text
        median, p95 = statistics.median(times), _percentile(times, 0.95)
        print(
            f"a partition's balance, {label}: median {median:.1f} ms, p95 {p95:.1f} ms,"
            f" slowest {max(times):.1f} ms over {count} requests"
        )
        target = BALANCE_TARGET_MS if named else None
        figures.append(Figure(f"balance, {label}, p95", p95, "ms", target))
    return figures


def journal(http: httpx.Client, engine: Engine, period: str) -> list[Figure]:
    """The closed period's journal, three times; its bytes are the close's."""
    with engine.connect() as conn:
        row = conn.execute(select(periods).where(periods.c.name == period)).one()
    times, size = [], 0
    for _ in range(3):
        started = time.perf_counter()
        answer = http.get(f"/v1/periods/{period}/journal?format=csv", headers=VIEWER)
        times.append(time.perf_counter() - started)
        answer.raise_for_status()
        size = len(answer.content)
        assert hashlib.sha256(answer.content).hexdigest() == row.journal_sha256
    print(
        f"journal of {period} ({row.rows:,} rows, {size / 1024:.0f} KiB of CSV, its SHA-256 the"
        f" close's): {', '.join(f'{t * 1000:.0f}' for t in times)} ms"
    )
    return [Figure(f"journal of a {row.rows:,}-row period", max(times), "s", JOURNAL_TARGET_S)]


def _rss_mib(pid: int) -> float:
    """The resident memory of a process and its children, in MiB."""
    total = 0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _reset_peak(pid: int) -> None:
    """Forget the processes' peak RSS (VmHWM), where the kernel allows it."""
    for p in descendants(pid):
        with suppress(OSError):
            Path(f"/proc/{p}/clear_refs").write_text("5")


def lines(http: httpx.Client, stack: Stack, period: str, expected: int) -> list[Figure]:
    """The period's journal lines streamed: rows a second, the API's peak RSS."""
    pid = stack.processes["api"].pid
    before = _rss_mib(pid)
    _reset_peak(pid)
    _, cpu_before = process_stats(pid)
    most = [before]
    streaming = threading.Event()

    def sample() -> None:
        while not streaming.is_set():
            most[0] = max(most[0], _rss_mib(pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    newlines, size = 0, 0
    started = time.perf_counter()
    try:
        with http.stream(
            "GET", f"/v1/periods/{period}/journal/lines?format=csv", headers=VIEWER
        ) as answer:
            answer.raise_for_status()
            first = None
            for chunk in answer.iter_bytes():
                if first is None:
                    first = time.perf_counter() - started
                newlines += chunk.count(b"\n")
                size += len(chunk)
    finally:
        streaming.set()
        sampler.join()
    took = time.perf_counter() - started
    hwm, cpu_after = process_stats(pid)
    peak = max(most[0], hwm)
    rows = newlines - 1  # the header
    assert rows == expected, (rows, expected)
    rate = rows / took
    print(
        f"journal lines of {period}: {rows:,} rows, {size / 2**20:.0f} MiB of CSV in {took:.1f} s"
        f" (first bytes after {(first or 0) * 1000:.0f} ms): {rate:,.0f} rows/s; the API's CPU"
        f" {cpu_after - cpu_before:.1f} s; its RSS {before:.0f} MiB before, peak {peak:.0f} MiB"
    )
    return [
        Figure("journal lines streamed", rate, "rows/s", LINES_TARGET_ROWS_S, floor=True),
        Figure("API peak RSS while streaming", peak, "MiB", RSS_TARGET_MIB),
    ]


def _first_line(engine: Engine, period: str, how: domain.Journaling) -> Any:
    streamed = reads.journal_lines(engine, period, sums.Scope(), how)
    try:
        return next(streamed)
    finally:
        streamed.close()  # type: ignore[attr-defined]


@contextmanager
def captured(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The statements run on ``engine`` within the block, with their parameters."""
    found: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        found.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield found
    finally:
        event.remove(engine, "before_cursor_execute", record)


def plans(engine: Engine, period: str) -> None:
    """EXPLAIN ANALYZE of the ledger's statements behind a closed and the open
    period's balance, the lines, and the close's sums of the open period."""
    how = domain.Journaling()
    with engine.connect() as conn:
        partition = conn.execute(
            text("SELECT min(partition_key) FROM period_balances WHERE period = :p"), {"p": period}
        ).scalar_one()
        open_row = conn.execute(select(periods).where(periods.c.status == "open")).one()
        last_id = conn.execute(text("SELECT max(id) FROM ledger_entries")).scalar_one()
    scope = sums.Scope(None, [partition])
    reads_of: list[tuple[str, Callable[[], Any]]] = [
        ("closed period's balance", lambda: reads.balances(engine, period, scope, how)),
        ("open period's balance", lambda: reads.balances(engine, None, scope, how)),
        (
            "journal lines",
            lambda: next(reads.journal_lines(engine, period, sums.Scope(), how)),
        ),
    ]

    def close_sums() -> None:
        # What the close's finalise reads of the period it closes (read-only here).
        row = SimpleNamespace(name=open_row.name, after_id=open_row.after_id, last_id=last_id)
        with engine.connect() as conn:
            sums.tally(conn, closing.in_period(row))
            closing.move_disputes(conn, row, sums.Scope(), {})

    reads_of.append(("the close's sums of the open period", close_sums))
    for label, read in reads_of:
        with captured(engine) as statements:
            read()
        for statement, parameters in statements:
            if "ledger_entries" not in statement and "period_balances" not in statement:
                continue
            with engine.connect() as conn:
                plan = conn.exec_driver_sql(
                    "EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters
                ).scalars()
                print(f"plan ({label}):\n    " + "\n    ".join(plan))


class Writers:
    """Threads committing units through the product's ledger writer, each one
    document of ``UNIT_LINES`` lines of a vendor of their own, until stopped."""

    def __init__(self, engine: Engine, count: int) -> None:
        self.engine = engine
        self.stop = threading.Event()
        self.commits: list[tuple[float, float, str]] = []  # (began, committed, job_id)
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(count)
        ]
        self.settings = Settings()

    def _unit(self, rng: random.Random, vendor: str) -> tuple[ChunkRef, Any]:
        lines = [
            promo_line(n + 1, str(rng.randrange(1, 400)), "1.00", rng.choice(("T1", "T2")))
            for n in range(UNIT_LINES)
        ]
        docs = [promo_doc(vendor, lines)]
        job_id, [message] = store_job(self.engine, self.settings, b"k", docs)
        parsed = [PromoDocument.model_validate(d) for d in docs]
        ref = ChunkRef(message["chunk_id"], job_id, KIND.name, UNIT_LINES)
        return ref, plan_chunk(KIND, parsed, {(vendor, 1): CONTRACT})

    def _run(self, n: int) -> None:
        rng = random.Random(n)
        try:
            while not self.stop.is_set():
                ref, plan = self._unit(rng, f"CLOSE-W{rng.randrange(WRITER_VENDORS):02d}")
                began = time.monotonic()
                with self.engine.begin() as conn:
                    commit_plan(conn, ref, plan, 1)
                self.commits.append((began, time.monotonic(), ref.job_id))
        except BaseException as exc:  # noqa: BLE001 - reported by the bench
            self.errors.append(exc)

    def __enter__(self) -> Self:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def close_under_load(http: httpx.Client, engine: Engine, writers: int) -> list[Figure]:
    """The open period's close while units commit; each unit on one side of the cut."""
    with engine.connect() as conn:
        row = conn.execute(select(periods).where(periods.c.status == "open")).one()
        booked = conn.execute(
            text("SELECT count(*) FROM ledger_entries WHERE id > :a"), {"a": row.after_id}
        ).scalar_one()
    with Writers(engine, writers) as running:
        time.sleep(2.0)  # settlement is under way
        before = len(running.commits)
        started = time.monotonic()
        answer = http.post(
            "/admin/periods/close",
            json={"period": row.name, "next": "bench-next", "note": "bench.periods"},
            headers=OPERATOR,
        )
        answered = time.monotonic()
        time.sleep(1.0)  # and goes on after the close
    took = answered - started
    assert not running.errors, running.errors
    assert answer.status_code == 200, answer.text
    summary = answer.json()
    during = [c for c in running.commits if c[0] < answered and c[1] > started]
    waited = max((c[1] - c[0] for c in during), default=0.0)
    jobs = [c[2] for c in running.commits]
    with engine.connect() as conn:
        split = conn.execute(
            text(
                "SELECT count(*) FROM (SELECT job_id FROM ledger_entries WHERE job_id = ANY(:j)"
                " GROUP BY job_id HAVING count(DISTINCT period) > 1) s"
            ),
            {"j": jobs},
        ).scalar_one()
        sides: dict[str, int] = dict(
            conn.execute(
                text(
                    "SELECT period, count(DISTINCT job_id) FROM ledger_entries"
                    " WHERE job_id = ANY(:j) GROUP BY period"
                ),
                {"j": jobs},
            ).all()
        )
    assert split == 0, f"{split} units booked across the cut"
    print(
        f"close of {row.name} ({summary['rows']:,} rows, {booked:,} of them before the writers)"
        f" while {writers} writers committed units of {UNIT_LINES} lines: answered in"
        f" {took:.2f} s; {before} units before it, {len(during)} committing during it (the"
        f" longest {waited:.2f} s), {len(running.commits)} in all: {sides.get(row.name, 0)} in"
        f" {row.name}, {sides.get('bench-next', 0)} in bench-next, none split"
    )
    return [Figure("close while settlement runs", took, "s", CLOSE_TARGET_S)]


if __name__ == "__main__":
    raise SystemExit(main())
