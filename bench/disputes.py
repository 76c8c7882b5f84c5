"""settleq benchmark of the dispute queue, on PostgreSQL (issue 14's figures).

Settles a deterministic promo_accrual claim whose every line is disputed
(default 110,000 lines over 50 vendors; a fifth of them within 1.00 of the
contract's model) through the real settlement code in this process (the
compute_heavy worker's ``settle_chunk`` on stored chunks), starts a real
``settleq api`` on that database and measures over HTTP:

- a bulk resolve of 10,000 open disputes: the weekly "write off everything
  under 1.00" (``POST /admin/disputes/resolve``, ``max_abs_variance`` 1.00,
  ``accept_model``), target <= 2 s;
- the CSV export of the 100,000 disputes left open (``GET /v1/disputes``
  with ``Accept: text/csv``), target <= 3 s, with the API process's peak RSS
  during it, target <= 300 MiB (VmHWM, reset just before the export, and
  VmRSS sampled every 10 ms).

Both are checked against the database: the resolved rows, resolution
records, events and audit entries; the CSV's row count, its amounts' sums and
a checksum of (id, claimed, model) over every row. Its own database, dropped
at the end.

    python -m bench.disputes                                   # 110,000 disputes
    python -m bench.disputes --disputes 22000 --resolve 2000   # quick mode
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import random
import re
import sys
import threading
import time
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, and_, exists, func, select
from sqlalchemy.orm import aliased

from bench.run import descendants, process_stats, service_cpu
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import make_context
from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.types import identity_key
from shared.domain.synthetic import PROMO_TIERS, PROMO_TOLERANCE
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv, isolated_env
from tests.support.stack import Stack

CENT = Decimal("0.01")
WRITE_OFF = Decimal("1.00")  # the bulk resolve's max_abs_variance
TARGETS = {"resolve_s": 2.0, "export_s": 3.0, "rss_mib": 300.0}
PLAIN_DECIMAL = re.compile(r"-?\d+(\.\d+)?")


def claim(
    lines: int, vendors: int, lines_per_doc: int = 20, seed: int = 14
) -> list[dict[str, Any]]:
    """Documents whose every line is beyond the contract's tolerance (disputed):
    one line in five within WRITE_OFF of its model, the others up to 500.00 away,
    over or under (never below zero)."""
    rng = random.Random(seed)
    documents = []
    for n in range(-(-lines // lines_per_doc)):
        doc_lines = []
        for line_no in range(1, min(lines_per_doc, lines - n * lines_per_doc) + 1):
            tier = ("T1", "T2", "T3")[rng.randrange(3)]
            units = rng.randrange(1, 500)
            model = (units * PROMO_TIERS[tier]).quantize(CENT, rounding=ROUND_HALF_UP)
            low = int(PROMO_TOLERANCE / CENT) + 1
            cents = rng.randint(low, 100) if rng.random() < 0.2 else rng.randint(101, 50_000)
            off = Decimal(cents) * CENT
            claimed = model - off if rng.random() < 0.5 and off <= model else model + off
            doc_lines.append(
                {
                    "line_no": line_no,
                    "sku": f"SKU-{rng.randrange(10**6):06d}",
                    "promo_tier": tier,
                    "qualifying_units": str(units),
                    "claimed_amount": str(claimed),
                }
            )
        documents.append(
            {
                "document_id": f"DISPUTE-{n:07d}",
                "partition_key": f"VENDOR-{n % vendors:04d}",
                "contract_version": 1,
                "period": "2026-Q3",
                "lines": doc_lines,
            }
        )
    return documents


def settle(env: ServiceEnv, documents: list[dict[str, Any]]) -> tuple[float, int]:
    """Settle the claim in process; (seconds, disputed rows written)."""
    settings = env.settings(max_chunk_documents=250)
    broker = build_broker(settings)
    ctx = make_context(settings, broker)
    try:
        publish_promo_contracts(ctx.engine, sorted({d["partition_key"] for d in documents}))
        started = time.monotonic()
        _, messages = store_job(ctx.engine, settings, ctx.internal_key, documents)
        for message in messages:
            stages.settle_chunk(ctx, message, 1)
        seconds = time.monotonic() - started
        ledger = tables.ledger_entries
        with ctx.engine.connect() as conn:
            disputed = conn.execute(
                select(func.count()).select_from(ledger).where(ledger.c.outcome == "disputed")
            ).scalar_one()
        return seconds, int(disputed)
    finally:
        ctx.engine.dispose()
        broker.close()


def open_disputes(engine: Engine) -> list[tuple[int, Decimal, Decimal]]:
    """(id, claimed, model) of every open dispute, read from the ledger by the
    rule itself: a disputed row no resolved row supersedes and no later
    posted/disputed row of its identity replaced."""
    ledger = tables.ledger_entries
    resolved, newer = aliased(ledger), aliased(ledger)
    query = (
        select(ledger.c.id, ledger.c.claimed_amount, ledger.c.amount)
        .where(ledger.c.outcome == "disputed")
        .where(
            ~exists().where(
                and_(resolved.c.outcome == "resolved", resolved.c.supersedes_id == ledger.c.id)
            )
        )
        .where(
            ~exists().where(
                and_(
                    newer.c.outcome.in_(("posted", "disputed")),
                    newer.c.kind == ledger.c.kind,
                    newer.c.partition_key == ledger.c.partition_key,
                    identity_key(newer.c.reconciliation_key)
                    == identity_key(ledger.c.reconciliation_key),
                    newer.c.id > ledger.c.id,
                )
            )
        )
        .order_by(ledger.c.id)
    )
    with engine.connect() as conn:
        return [(int(i), Decimal(c), Decimal(m)) for i, c, m in conn.execute(query)]


@dataclass
class Digest:
    rows: int = 0
    claimed: Decimal = Decimal(0)
    model: Decimal = Decimal(0)
    plain: bool = True  # every amount a plain decimal (no exponent, no float form)

    def __post_init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, dispute_id: int, claimed: str | Decimal, model: str | Decimal) -> None:
        if isinstance(claimed, str) and isinstance(model, str):
            self.plain &= bool(PLAIN_DECIMAL.fullmatch(claimed) and PLAIN_DECIMAL.fullmatch(model))
        c, m = Decimal(claimed), Decimal(model)
        self.rows += 1
        self.claimed += c
        self.model += m
        # Value, not spelling: 1.50 and 1.5000 are the same amount.
        self._hash.update(f"{dispute_id}|{c.normalize()}|{m.normalize()}\n".encode())

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def outbox_mark(engine: Engine) -> int:
    """The last outbox row's id: the events written after it are the run's."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.max(tables.outbox.c.id), 0))).scalar())


def resolved_checks(engine: Engine, expected: int, outbox_after: int) -> dict[str, bool]:
    """What a bulk resolve of ``expected`` disputes must have written, one of each."""
    ledger, disputed = tables.ledger_entries, aliased(tables.ledger_entries)
    outbox, audit = tables.outbox, tables.audit_log
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger.c.id, disputed.c.claimed_amount, disputed.c.amount, ledger.c.amount)
            .select_from(ledger.join(disputed, disputed.c.id == ledger.c.supersedes_id))
            .where(ledger.c.outcome == "resolved")
        ).all()
        deltas = conn.execute(
            select(func.count()).where(ledger.c.outcome == "resolved", ledger.c.delta != 0)
        ).scalar_one()
        records = conn.execute(
            select(func.count()).select_from(tables.dispute_resolutions)
        ).scalar_one()
        audits = conn.execute(
            select(func.count()).where(audit.c.action == "dispute_resolve")
        ).scalar_one()
        events = conn.execute(
            select(outbox.c.ledger_entry_id, outbox.c.ledger_entry_ids).where(
                outbox.c.id > outbox_after
            )
        ).all()
    # An outbox row holds one event (ledger_entry_id) or a unit's (ledger_entry_ids).
    evented = [i for one, many in events for i in ([one] if one is not None else many or [])]
    ids = {r[0] for r in rows}
    return {
        f"{expected} resolved rows": len(rows) == len(ids) == expected,
        "each within the write-off bound": all(abs(c - m) <= WRITE_OFF for _, c, m, _ in rows),
        "accept_model: amount = model, delta 0": all(a == m for *_, m, a in rows) and not deltas,
        "one resolution record each": records == expected,
        "one audit entry each": audits == expected,
        "one outcome event each": sorted(evented) == sorted(ids),
    }


class RssSampler(threading.Thread):
    """The largest VmRSS of a process (and its children) while running."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_mib, self.done = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.01):
            self.peak_mib = max(self.peak_mib, rss_mib(self.pid))


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    peak = 0.0
    for p in descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith(f"{field}:"):
                peak = max(peak, int(line.split()[1]) / 1024)
    return peak


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux: 5 > clear_refs); False if refused."""
    try:
        for p in descendants(pid):
            Path(f"/proc/{p}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def cpu_s(pid: int) -> float:
    return process_stats(pid)[1]


def export_csv(url: str, digest: Digest) -> tuple[float, int, list[str]]:
    """Stream the CSV of open disputes into ``digest``; (seconds, bytes, header)."""
    headers = {"Authorization": f"Bearer {VIEWER_TOKEN}", "Accept": "text/csv"}
    started = time.monotonic()
    with httpx.stream("GET", f"{url}/v1/disputes", headers=headers, timeout=600) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/csv")
        # Line by line as it arrives (a quoted note may span lines: csv joins them).
        reader = csv.reader(response.iter_lines())
        header = next(reader)
        column = {name: i for i, name in enumerate(header)}
        i, c, m = column["id"], column["claimed_amount"], column["model_amount"]
        for row in reader:
            digest.add(int(row[i]), row[c], row[m])
        received = response.num_bytes_downloaded
    return time.monotonic() - started, received, header


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--disputes", type=int, default=110_000)
    parser.add_argument("--resolve", type=int, default=10_000, help="the bulk resolve's limit")
    parser.add_argument("--vendors", type=int, default=50)
    args = parser.parse_args()

    documents = claim(args.disputes, args.vendors)
    small = sum(
        1
        for d in documents
        for line in d["lines"]
        if abs(
            Decimal(line["claimed_amount"])
            - (Decimal(line["qualifying_units"]) * PROMO_TIERS[line["promo_tier"]]).quantize(
                CENT, rounding=ROUND_HALF_UP
            )
        )
        <= WRITE_OFF
    )
    assert small >= args.resolve, f"only {small} disputes within {WRITE_OFF}: raise --disputes"
    with isolated_env("bdisp") as env:
        settle_s, disputed = settle(env, documents)
        print(f"settled {args.disputes} lines in {settle_s:.1f} s: {disputed} disputes open")
        engine = make_engine(env.database_url)
        logs = Path("bench/logs")
        logs.mkdir(parents=True, exist_ok=True)
        stack = Stack(env, logs)
        try:
            stack.start_api()
            api = stack.processes["api"].pid
            viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
            t0 = time.monotonic()
            stats = httpx.get(f"{stack.url}/v1/disputes/stats", headers=viewer, timeout=60)
            stats_s = time.monotonic() - t0
            assert stats.status_code == 200, stats.text

            # (a) the bulk resolve
            body = {
                "decision": "accept_model",
                "note": f"write-off: variance within {WRITE_OFF}",
                "max_abs_variance": str(WRITE_OFF),
                "limit": args.resolve,
            }
            mark = outbox_mark(engine)
            cpu0, services0 = cpu_s(api), service_cpu()
            t0 = time.monotonic()
            response = httpx.post(
                f"{stack.url}/admin/disputes/resolve",
                json=body,
                headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
                timeout=600,
            )
            resolve_s = time.monotonic() - t0
            resolve_cpu = (cpu_s(api) - cpu0, service_cpu()["postgres"] - services0["postgres"])
            assert response.status_code == 200, response.text
            resolved = int(response.json()["resolved"])
            checks = {f"bulk resolve answered {args.resolve}": resolved == args.resolve}
            checks |= resolved_checks(engine, args.resolve, mark)

            # (b) the CSV export, with the API's peak RSS during it
            expected = Digest()
            for row in open_disputes(engine):
                expected.add(*row)
            rss_before = rss_mib(api)
            hwm_reset = reset_peak_rss(api)
            sampler = RssSampler(api)
            sampler.start()
            got = Digest()
            cpu0, services0 = cpu_s(api), service_cpu()
            export_s, size, header = export_csv(stack.url, got)
            export_cpu = (cpu_s(api) - cpu0, service_cpu()["postgres"] - services0["postgres"])
            sampler.done.set()
            sampler.join()
            hwm = rss_mib(api, "VmHWM")
            peak = max(sampler.peak_mib, hwm if hwm_reset else 0.0)
            checks |= {
                f"CSV rows = open disputes in the ledger ({expected.rows})": got.rows
                == expected.rows,
                "CSV claimed and model sums = the ledger's": (got.claimed, got.model)
                == (expected.claimed, expected.model),
                "CSV checksum of (id, claimed, model) = the ledger's": got.sha256
                == expected.sha256,
                "CSV amounts are plain decimals": got.plain,
            }

            # /metrics over the same queue: the gauges read it at scrape time.
            t0 = time.monotonic()
            scrape = httpx.get(f"{stack.url}/metrics", headers=viewer, timeout=60)
            metrics_s = time.monotonic() - t0
            gauges = {
                (s.name, s.labels.get("kind")): s.value
                for family in text_string_to_metric_families(scrape.text)
                for s in family.samples
                if s.name.startswith("settleq_disputes_")
            }
            checks["/metrics: settleq_disputes_open = the CSV's rows"] = (
                gauges.get(("settleq_disputes_open", "promo_accrual")) == got.rows
            )
        finally:
            stack.stop()
            engine.dispose()

    for name, passed in checks.items():
        print(f"  {'ok ' if passed else 'BAD'} {name}")
    met = {
        "resolve_s": resolve_s <= TARGETS["resolve_s"],
        "export_s": export_s <= TARGETS["export_s"],
        "rss_mib": peak <= TARGETS["rss_mib"],
    }
    verdict = {True: "met", False: "MISSED"}
    print()
    print("| measure | figure | target | |")
    print("|---|---|---|---|")
    print(
        f"| bulk resolve of {resolved:,} open disputes (POST → 200) | {resolve_s:.2f} s "
        f"| ≤ {TARGETS['resolve_s']:.0f} s | {verdict[met['resolve_s']]} |"
    )
    print(
        f"| CSV export of {got.rows:,} disputes (GET → last byte) | {export_s:.2f} s "
        f"| ≤ {TARGETS['export_s']:.0f} s | {verdict[met['export_s']]} |"
    )
    print(
        f"| API peak RSS during the export | {peak:.0f} MiB | ≤ {TARGETS['rss_mib']:.0f} MiB "
        f"| {verdict[met['rss_mib']]} |"
    )
    print(
        f"\nAPI RSS before the export {rss_before:.0f} MiB; sampled peak {sampler.peak_mib:.0f} "
        f"MiB; VmHWM {'(reset before it) ' if hwm_reset else '(process lifetime) '}{hwm:.0f} MiB;"
        f" CSV {size / 1e6:.1f} MB, {len(header)} columns: {','.join(header)}"
    )
    print(
        f"GET /v1/disputes/stats over {disputed:,} disputes: {stats_s:.2f} s (first call); "
        f"GET /metrics over {got.rows:,} open: {metrics_s:.2f} s"
    )
    per_resolve = 1e6 / max(1, resolved)
    per_row = 1e6 / max(1, got.rows)
    print(
        f"\nratios: bulk resolve {resolve_s * per_resolve:.0f} µs per dispute (API CPU "
        f"{resolve_cpu[0] * per_resolve:.0f}, PostgreSQL CPU {resolve_cpu[1] * per_resolve:.0f});"
        f" CSV export {export_s * per_row:.1f} µs per row (API CPU {export_cpu[0] * per_row:.1f},"
        f" PostgreSQL CPU {export_cpu[1] * per_row:.1f}); RSS growth during the export "
        f"{max(0.0, peak - rss_before):.0f} MiB for {got.rows:,} rows; export/resolve time per "
        f"item {export_s * per_row / (resolve_s * per_resolve):.3f}"
    )
    ok = all(checks.values())
    print(f"verification {'OK' if ok else 'FAILED'}; targets {sum(met.values())}/3 met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
