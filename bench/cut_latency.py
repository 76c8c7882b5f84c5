"""How soon a dated period's cut at ``ends_at`` moves booking to the next
period (docs/architecture.md#dated-periods-the-cut-at-ends_at): on the
machine's PostgreSQL, a ledger of periods ``--seconds`` long (the drills'
``SETTLEQ_PERIOD_SECONDS``), a ``Cutter`` as an API process runs it, and
``--writers`` threads committing units through the product's ledger writer
without pause. For each of ``--cuts`` cuts it prints, after ``ends_at``:

- ``cut``: when the cut was made (its ``ended_at``);
- ``last in ended``: the commit of the last unit booked in the ended period
  (booking went on into it until the cut; negative: before ``ends_at``);
- ``first in next``: the commit of the first unit booked in the next period.

and the largest of each. The figure wanted is "first in next" at most 1 s
after ``ends_at`` over the 20 cuts. Times are the writers' clock, the same
as the cutter's; on a shared machine they are indicative.

Then settlement's throughput across the cuts: the units the writers
committed a second while the cuts were made, against the same writers on a
ledger whose period does not end in the run (run before and after it, on a
database of its own, and averaged): the figure wanted is at least 90%.

    python -m bench.cut_latency [--cuts 20] [--seconds 2] [--writers 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import time
from typing import Any

from sqlalchemy import Engine, select

from bench.periods import Writers
from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import ensure_internal_key, upgrade
from shared.adapters.db.periods import dated
from shared.adapters.db.periods.tables import periods
from shared.adapters.db.tables import ledger_entries
from shared.adapters.db.types import utc
from shared.domain.period_dates import Calendar
from tests.support.factories import uid
from tests.support.infra import create_database, drop_database
from tests.support.ledger import commit_plan

TARGET_S = 1.0


class TimedWriters(Writers):
    """``Writers`` that note each unit's commit on the wall clock, to set
    against ``ends_at``."""

    def __init__(self, engine: Engine, count: int) -> None:
        super().__init__(engine, count)
        self.committed: dict[str, dt.datetime] = {}

    def _run(self, n: int) -> None:
        rng = random.Random(n)
        try:
            while not self.stop.is_set():
                ref, plan = self._unit(rng, f"CUT-W{n:02d}")
                with self.engine.begin() as conn:
                    commit_plan(conn, ref, plan, 1)
                self.committed[ref.job_id] = dt.datetime.now(dt.UTC)
        except BaseException as exc:  # noqa: BLE001 - reported by the bench
            self.errors.append(exc)


def _ended(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(periods).where(periods.c.status == "ended").order_by(periods.c.seq)
            ).all()
        )


Cut = tuple[str, float, float, float]


def measure(engine: Engine, cuts: int, seconds: int, writers: int) -> tuple[list[Cut], float]:
    """The cuts, and the units committed a second while they were made."""
    calendar = Calendar("seconds", "UTC", seconds)
    cutter = dated.Cutter(engine, calendar, "UTC", 30.0).start()
    try:
        with TimedWriters(engine, writers) as running:
            started = time.monotonic()
            deadline = started + (cuts + 3) * seconds + 30
            while len(_ended(engine)) < cuts + 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            elapsed = time.monotonic() - started
            rate = len(running.committed) / elapsed
    finally:
        cutter.close()
    if running.errors:
        raise running.errors[0]
    with engine.connect() as conn:
        booked = dict(
            conn.execute(select(ledger_entries.c.job_id, ledger_entries.c.period).distinct()).all()
        )
    by_period: dict[str, list[dt.datetime]] = {}
    for job_id, at in running.committed.items():
        by_period.setdefault(booked[job_id], []).append(at)
    # The first period began before the writers did: measured from the second.
    found = []
    for p in _ended(engine)[1 : cuts + 1]:
        ends_at = utc(p.ends_at)
        ended = by_period.get(p.name, [])
        following = by_period.get(p.next, [])
        found.append(
            (
                p.name,
                (utc(p.ended_at) - ends_at).total_seconds(),
                (max(ended) - ends_at).total_seconds() if ended else float("nan"),
                (min(following) - ends_at).total_seconds() if following else float("nan"),
            )
        )
    return found, rate


def uncut_rate(writers: int, window_s: float) -> float:
    """The units the same writers commit a second, with a cutter running, on a
    ledger of a dated period that does not end in the run."""
    name = f"settleq_bench_uncut_{uid()}"
    url = create_database(name)
    try:
        calendar = Calendar("seconds", "UTC", 10**6)
        upgrade(url, None, calendar)
        engine = make_engine(url, component="settleq-bench")
        try:
            ensure_internal_key(engine)
            cutter = dated.Cutter(engine, calendar, "UTC", 30.0).start()
            try:
                with TimedWriters(engine, writers) as running:
                    started = time.monotonic()
                    time.sleep(window_s)
                    rate = len(running.committed) / (time.monotonic() - started)
            finally:
                cutter.close()
            if running.errors:
                raise running.errors[0]
        finally:
            engine.dispose()
    finally:
        drop_database(name)
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=2, help="each period's length")
    parser.add_argument("--writers", type=int, default=2)
    args = parser.parse_args()
    window_s = (args.cuts + 1) * args.seconds
    before = uncut_rate(args.writers, window_s)
    name = f"settleq_bench_cut_{uid()}"
    url = create_database(name)
    try:
        # A ledger made by `settleq migrate` with SETTLEQ_PERIOD_SECONDS set.
        upgrade(url, None, Calendar("seconds", "UTC", args.seconds))
        engine = make_engine(url, component="settleq-bench")
        try:
            ensure_internal_key(engine)
            found, rate = measure(engine, args.cuts, args.seconds, args.writers)
        finally:
            engine.dispose()
    finally:
        drop_database(name)
    after = uncut_rate(args.writers, window_s)
    print(
        f"{'period':>14} {'cut':>8} {'last in ended':>14} {'first in next':>14}  (s after ends_at)"
    )
    for period, cut, last, first in found:
        print(f"{period:>14} {cut:8.3f} {last:14.3f} {first:14.3f}")
    worst = [max(float(f[i]) for f in found) for i in (1, 2, 3)]
    print(f"{'max':>14} {worst[0]:8.3f} {worst[1]:14.3f} {worst[2]:14.3f}")
    met = worst[2] <= TARGET_S
    print(
        f"first row booked in the next period at most {TARGET_S:.0f} s after ends_at"
        f" over {len(found)} cuts: {'met' if met else 'NOT met'} (max {worst[2]:.3f} s)"
    )
    base = (before + after) / 2
    ratio = rate / base
    print(
        f"throughput across the cuts: {rate:.1f} units/s against {base:.1f} without a cut"
        f" (before {before:.1f}, after {after:.1f}): {ratio:.0%}, target >= 90%:"
        f" {'met' if ratio >= 0.9 else 'NOT met'}"
    )
    return 0 if met and ratio >= 0.9 and len(found) == args.cuts else 1


if __name__ == "__main__":
    raise SystemExit(main())
