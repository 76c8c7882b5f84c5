"""Where a line's CPU goes: one ``bench.run`` claim, each settleq process's and
each service's core-µs a line, beside the floor's (its process and its
PostgreSQL backend) on the same lines and server in the same invocation.

    python -m bench.costs                      # 500,000 lines, the bench's tuned server
    python -m bench.costs --postgres machine   # the machine's own server
    python -m bench.costs --lines 100000       # quicker, noisier

The ratio of the whole machine's core-µs a line to the floor's is the figure
this machine's day-to-day speed does not move; the table is what
docs/performance.md#a-lines-cost keeps, with the date and the machine's
``sum(range(10**8))`` time printed first.
"""

from __future__ import annotations

import datetime as dt
import sys
import time

from bench.claim import Measured
from bench.floor import Floor
from bench.run import parse_args, run_session
from tests.support.workload import generate, ndjson


def machine_speed() -> float:
    """Seconds this machine takes for ``sum(range(10**8))``: the day's speed."""
    started = time.perf_counter()
    sum(range(10**8))
    return time.perf_counter() - started


def cost_table(m: Measured, floor: Floor) -> list[str]:
    """Core-µs a line per process and service, settleq's beside the floor's."""

    def per_line(cpu_s: float, lines: int) -> float:
        return cpu_s / lines * 1e6

    rows: list[tuple[str, float, float | None]] = []
    for name, (_, cpu) in m.stats.items():
        # The relay's work on a claim goes on after the job completed: all of it.
        cpu = m.relay_cpu if name == "relay" and m.relay_cpu else cpu
        rows.append((name, per_line(cpu, m.lines), None))
    rows.append(("floor's process", 0.0, per_line(floor.cpu_s, floor.lines)))
    for name, cpu in sorted(m.services.items()):
        backend = per_line(floor.server_cpu_s, floor.lines) if name == "postgres" else None
        rows.append((name, per_line(cpu, m.lines), backend))
    settleq = sum(value for _, value, _ in rows)
    floor_total = per_line(floor.cpu_s + floor.server_cpu_s, floor.lines)
    out = ["| where | settleq core-µs a line | floor core-µs a line |", "|---|---:|---:|"]
    for name, value, at_floor in rows:
        shown = "" if name == "floor's process" else f"{value:.1f}"
        out.append(f"| {name} | {shown} | {'' if at_floor is None else f'{at_floor:.1f}'} |")
    out.append(f"| **whole machine** | **{settleq:.1f}** | **{floor_total:.1f}** |")
    out += [
        "",
        f"settleq / floor, core-µs a line: {settleq / floor_total:.2f}"
        f" (target ≤ 3); lines/s: settleq {m.rate:,.0f}, floor {floor.rate:,.0f},"
        f" settleq / floor {m.rate / floor.rate:.2f} (target ≥ 0.5)",
    ]
    return out


def main() -> int:
    args = parse_args()
    speed = machine_speed()
    print(f"{dt.date.today().isoformat()}: sum(range(10**8)) took {speed:.2f} s on this machine")
    data = generate(args.lines, args.vendors)
    body = ndjson(data.documents)
    total = sum(len(d["lines"]) for d in data.documents)
    [kind] = [args.postgres] if args.postgres != "both" else ["tuned"]
    session = run_session(args, data, body, total, "run", 0, kind)
    [claim] = session.claims
    assert session.floor is not None
    print()
    print("\n".join(cost_table(claim, session.floor)))
    return 0 if claim.ok else 1


if __name__ == "__main__":
    sys.exit(main())
