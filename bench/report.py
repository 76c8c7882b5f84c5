"""What ``bench.run`` prints: a claim's figures, claim by claim under ``--repeat``,
and the empty ledger against the filled one under ``--ledger-rows``."""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.claim import Measured
from bench.floor import Floor
from bench.ledger_fill import Filled

# --ledger-rows: the filled ledger's lines/s must be at least this share of the empty one's.
KEPT_RATE = 0.80
# --repeat: from the first claim to the last, peak RSS may grow and lines/s fall this much.
DRIFT = 0.10


@dataclass
class Session:
    """One stack on its own database: its claims, after an optional fill."""

    label: str
    claims: list[Measured]
    filled: Filled | None = None
    floor: Floor | None = None  # bench.floor on the same lines and server, just before

    @property
    def rate(self) -> float:
        """lines/s: the median of the claims' (the one claim's without --repeat)."""
        return statistics.median(m.rate for m in self.claims)


def report(session: Session) -> None:
    """The last claim's figures; before them, with several claims, each claim's."""
    if len(session.claims) > 1:
        print_claims(session.claims, session.floor)
    print_claim(session.claims[-1])
    if session.floor is not None:
        floor, last = session.floor, session.claims[-1]
        print(
            f"\nsettleq / floor: {last.rate / floor.rate:.2f} (settleq {last.rate:,.0f} lines/s,"
            f" floor {floor.rate:,.0f} lines/s, same invocation; bench/floor.py)"
        )
    if len(session.claims) > 1:
        print_drift(session.claims)


def p99(values: Sequence[float]) -> float:
    """The 99th percentile, nearest rank: of fewer than 100 values, the largest."""
    if not values:
        return float("nan")
    return sorted(values)[math.ceil(0.99 * len(values)) - 1]


def print_claim(m: Measured) -> None:
    total, e2e_s = m.lines, m.e2e_s
    print()
    print(
        "| lines | accept (POST→202) | end to end | lines/s "
        f"| small-batch latency, median / p99 of {len(m.latencies)} |"
    )
    print("|---|---|---|---|---|")
    median = statistics.median(m.latencies) if m.latencies else float("nan")
    print(
        f"| {total} | {m.accept_s:.2f} s | {e2e_s:.2f} s | {total / e2e_s:,.0f} |"
        f" {median:.2f} s / {p99(m.latencies):.2f} s |"
    )
    if m.close_s is not None:
        print(f"\na period closed halfway answered in {m.close_s:.2f} s (target: 5 s)")
    print(
        f"\nlast outcome event published {m.events_s:.2f} s after the POST,"
        f" {m.events_s - e2e_s:.2f} s after the job completed (the relay's lag);"
        f" relay CPU until then {m.relay_cpu:.1f} s, {m.relay_cpu / m.events * 1e6:.1f} µs"
        f" an event ({m.events} events)"
    )
    print()
    print("| process | peak RSS | CPU s (POST → completed) | CPU µs/line |")
    print("|---|---|---|---|")
    cpu_total = 0.0
    for name, (rss, cpu) in m.stats.items():
        cpu_total += cpu
        print(f"| {name} | {rss:.0f} MiB | {cpu:.1f} | {cpu / total * 1e6:.1f} |")
    print(f"| all settleq processes | | {cpu_total:.1f} | {cpu_total / total * 1e6:.1f} |")
    for name, cpu in m.services.items():
        print(f"| {name} (during the run) | | {cpu:.1f} | {cpu / total * 1e6:.1f} |")
    cores = os.cpu_count() or 1
    print(
        f"\nmachine: {m.busy / (e2e_s * cores):.0%} of {cores} cores busy, "
        f"{m.iowait / (e2e_s * cores):.0%} waiting on I/O, during the run"
    )
    print(f"small-batch latencies: {', '.join(f'{x:.2f}' for x in m.latencies)} s")
    print(
        f"\nratios: {total / e2e_s / cores:,.0f} lines/s per core; "
        f"accept {m.accept_s / e2e_s:.0%} of end to end;"
        f" verification {'OK' if m.ok else 'FAILED'}"
    )


def print_claims(claims: Sequence[Measured], floor: Floor | None = None) -> None:
    """One row a claim: its figures and every process's peak RSS after it."""
    names = list(claims[0].peak_after)
    print(
        f"\n{len(claims)} claims of {claims[0].lines:,} lines back to back"
        " (peak RSS so far, read once each claim's events were published):"
    )
    print(
        "| claim | accept | end to end | lines/s | settleq / floor | last event after completion |"
        " settleq CPU µs/line | PostgreSQL µs/line | " + " | ".join(names) + " | verified |"
    )
    print("|---|---|---|---|---|---|---|---|" + "---|" * len(names) + "---|")
    for k, m in enumerate(claims, 1):
        rss = " | ".join(f"{m.peak_after[name]:.0f} MiB" for name in names)
        settleq = sum(cpu for _, cpu in m.stats.values()) / m.lines * 1e6
        postgres = m.services["postgres"] / m.lines * 1e6
        print(
            f"| {k} | {m.accept_s:.2f} s | {m.e2e_s:.2f} s | {m.rate:,.0f} |"
            f" {m.rate / floor.rate if floor else float('nan'):.2f} |"
            f" {m.events_s - m.e2e_s:.2f} s | {settleq:.1f} | {postgres:.1f} |"
            f" {rss} | {'OK' if m.ok else 'FAILED'} |"
        )
    print(f"\nthe last claim's figures (claim {len(claims)}):")


def print_drift(claims: Sequence[Measured]) -> None:
    """Sustained load: peak RSS after the last claim against after the first, and lines/s."""
    first, last, k = claims[0], claims[-1], len(claims)
    print(f"\nsustained load: after claim {k} against after claim 1 (at most {DRIFT:.0%} worse)")
    print(f"| process | peak RSS after claim 1 | after claim {k} | change | |")
    print("|---|---|---|---|---|")
    for name, rss1 in first.peak_after.items():
        rss = last.peak_after[name]
        ok = rss <= rss1 * (1 + DRIFT)
        print(
            f"| {name} | {rss1:.0f} MiB | {rss:.0f} MiB | {rss / rss1 - 1:+.1%} |"
            f" {'ok' if ok else 'MISSED'} |"
        )
    ok = last.rate >= first.rate * (1 - DRIFT)
    print(
        f"lines/s: claim 1 {first.rate:,.0f}, claim {k} {last.rate:,.0f}"
        f" ({last.rate / first.rate - 1:+.1%}): {'ok' if ok else 'MISSED'}"
    )


def compare_ledgers(empty: Session, filled: Session) -> None:
    assert filled.filled is not None
    f = filled.filled
    kept = filled.rate / empty.rate
    of = f" (median of {len(empty.claims)} claims)" if len(empty.claims) > 1 else ""
    print(f"\ncost growth, the same claim on an empty ledger and on {f.rows:,} rows of history:")
    print(f"| ledger | lines/s{of} | end to end |")
    print("|---|---|---|")
    for s in (empty, filled):
        e2e = statistics.median(m.e2e_s for m in s.claims)
        print(f"| {s.label} | {s.rate:,.0f} | {e2e:.2f} s |")
    print(
        f"kept {kept:.0%} of the empty ledger's lines/s (at least {KEPT_RATE:.0%}):"
        f" {'ok' if kept >= KEPT_RATE else 'MISSED'}; the ledger grows"
        f" {f.mib_per_million():.1f} MiB on disk per million rows; filled at {f.rate:,.0f} rows/s"
    )


def compare_servers(sessions: dict[str, Session]) -> None:
    """--postgres both: the last claim of each, on PostgreSQL's defaults and tuned."""
    print("\nPostgreSQL's defaults against docker/compose.yaml's server settings (last claim):")
    print("| server | lines/s | end to end | PostgreSQL µs/line | lines/s, last claim to first |")
    print("|---|---|---|---|---|")
    for kind, session in sessions.items():
        first, last = session.claims[0], session.claims[-1]
        drift = f"{last.rate / first.rate - 1:+.1%}" if len(session.claims) > 1 else ""
        postgres = last.services["postgres"] / last.lines * 1e6
        print(f"| {kind} | {last.rate:,.0f} | {last.e2e_s:.2f} s | {postgres:.1f} | {drift} |")
