"""A contract preview against settling the same documents (issue 55's figure;
docs/architecture.md#previews).

On a database of its own, one vendor's deterministic promo_accrual documents
(default 100,000 documents of 5 lines) are stored and settled under version 1
through the settle stage. Then, in one sitting:

- ``preview``: version 2 (every tier rate 10% up) previewed over the open
  period, as ``POST .../preview`` does it (the adapter, the answer's sums and
  digest; no HTTP), while a sampler watches PostgreSQL for any lock or
  transaction id the preview holds that a settlement could wait on;
- ``settle``: version 2 published and the same documents re-sent through the
  settle stage (stored first, untimed: the front door's work).

It prints both times, their ratio (the target: the preview takes no longer),
what the sampler saw, and checks that the money the re-send moved is the
preview's, to the cent.

Then a batch preview: a 10,000-line promo_accrual batch of 5 vendors (20
lines a document, 1% of them documents already settled), signed and posted
with ``?preview=true`` to an API serving on a port, as a producer would, five
times; it prints each answer's wall time (the target: ≤ 2 s).

    python -m bench.previews [--documents 100000] [--lines-per-doc 5] [--batch-lines 10000]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, func, select, text

from services.commands.client import Client
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import WorkerContext, make_context
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.periods import booking
from shared.adapters.db.previews import contracts as previews
from shared.domain import previews as domain
from shared.domain.kinds import KINDS
from shared.domain.synthetic import promo_contract
from tests.support.factories import store_job
from tests.support.infra import PRODUCER_ID, PRODUCER_SECRET, isolated_env
from tests.support.served import api_in_thread
from tests.support.workload import generate

VENDOR = "VENDOR-0000"
JOB_DOCUMENTS = 20_000  # documents a stored job holds

# Any lock or transaction id of another backend of this database that a
# settlement could wait on: an advisory lock, a row or tuple lock, an xid
# (but the audit line's, the preview's one write, in a transaction of its own).
_HELD = """
SELECT count(*) FILTER (WHERE l.locktype = 'advisory'),
       count(*) FILTER (WHERE l.locktype IN ('tuple', 'transactionid') AND l.granted),
       (SELECT count(*) FROM pg_stat_activity a
        WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
          AND a.backend_xid IS NOT NULL
          -- the preview's own audit line, written once it is done
          AND a.query NOT LIKE 'INSERT INTO audit_log%')
FROM pg_locks l
WHERE l.pid <> pg_backend_pid() AND l.database = (
    SELECT oid FROM pg_database WHERE datname = current_database())
"""


def settle_all(ctx: WorkerContext, docs: list[dict[str, Any]]) -> float:
    """Store the documents as jobs (untimed), then settle every chunk; seconds."""
    messages = []
    for start in range(0, len(docs), JOB_DOCUMENTS):
        part = docs[start : start + JOB_DOCUMENTS]
        messages += store_job(ctx.engine, ctx.settings, ctx.internal_key, part)[1]
    began = time.perf_counter()
    for message in messages:
        stages.settle_chunk(ctx, message, 1)
    return time.perf_counter() - began


class Sampler(threading.Thread):
    """The most advisory locks, row locks and transaction ids seen at once."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.done = threading.Event()
        self.seen = [0, 0, 0]
        self.samples = 0

    def run(self) -> None:
        with self.engine.connect() as conn:
            while not self.done.is_set():
                row = conn.execute(text(_HELD)).one()
                self.seen = [max(a, b) for a, b in zip(self.seen, row, strict=True)]
                self.samples += 1
                conn.rollback()
                time.sleep(0.05)


def batch_preview(env: Any, ctx: WorkerContext, lines: int, runs: int = 5) -> None:
    """A batch preview's answer time over HTTP (api_in_thread: the API on a port)."""
    data = generate(lines, 5, seed=700)
    for v in sorted({d["partition_key"] for d in data.documents}):
        put_contract(ctx.engine, "promo_accrual", v, 1, promo_contract())
    settle_all(ctx, data.earlier)  # the repeats are duplicates
    body = json.dumps({"kind": "promo_accrual", "documents": data.documents}).encode()
    with api_in_thread(env.settings()) as url:
        client = Client(url, PRODUCER_ID, PRODUCER_SECRET, timeout=120)
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            response = client.submit(body, query={"preview": "true"})
            times.append(time.perf_counter() - began)
            assert response.status_code == 200, response.text
        client.close()
    totals = response.json()["totals"]
    print(
        f"batch preview of {totals['lines']} lines ({totals['posted']} posted, {totals['disputed']}"
        f" disputed, {totals['duplicate']} duplicate): "
        + ", ".join(f"{t:.2f}" for t in times)
        + f" s; worst {max(times):.2f} s (target ≤ 2 s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--lines-per-doc", type=int, default=5)
    parser.add_argument("--batch-lines", type=int, default=10_000)
    args = parser.parse_args()
    kind = KINDS["promo_accrual"]
    with isolated_env("bpreview") as env:
        settings = env.settings(relay_grace_s=0)
        broker = build_broker(settings)
        ctx = make_context(settings, broker)
        try:
            lines = args.documents * args.lines_per_doc
            data = generate(lines, 1, args.lines_per_doc)
            docs = data.documents
            v1 = promo_contract()
            put_contract(ctx.engine, kind.name, VENDOR, 1, v1)
            first = settle_all(ctx, docs)
            print(f"{len(docs)} documents, {lines} lines; settled under version 1 in {first:.1f} s")
            v2 = {
                **v1,
                "tier_rates": {
                    t: str((Decimal(r) * Decimal("1.1")).quantize(Decimal("0.0001")))
                    for t, r in v1["tier_rates"].items()
                },
            }
            contract = kind.contract_model.model_validate(
                kind.contract_for_publication(v2).model_dump(mode="json")
            )
            with ctx.engine.connect() as conn:
                period = booking.open_period(conn)

            sampler = Sampler(ctx.engine)
            sampler.start()
            began = time.perf_counter()
            found = previews.preview_contract(
                ctx.engine,
                kind,
                VENDOR,
                contract,
                previews.Selection(period=period),
                actor="bench",
                audit_details={},
            )
            docs_changed = domain.document_changes(found.lines, found.now)
            whole, _ = domain.totals(found.lines)
            answer = {
                "documents": [d.wire() for d in docs_changed],
                "totals": domain.change_totals(docs_changed),
                "outcomes": whole.wire(),
            }
            digest = domain.digest(answer)
            preview_s = time.perf_counter() - began
            sampler.done.set()
            sampler.join()

            put_contract(ctx.engine, kind.name, VENDOR, 2, v2)
            settle_s = settle_all(ctx, [{**d, "contract_version": 2} for d in docs])
            with ctx.engine.connect() as conn:
                le = tables.ledger_entries.c
                moved = conn.execute(
                    select(func.sum(le.delta)).where(
                        le.contract_version == 2, le.partition_key == VENDOR
                    )
                ).scalar_one()
            print(f"preview  {preview_s:7.1f} s  ({len(found.lines)} lines, {digest[:19]}…)")
            print(f"settle   {settle_s:7.1f} s  (the re-send under version 2, settle stage)")
            print(f"preview/settle {preview_s / settle_s:.2f} (target ≤ 1.00)")
            advisory, row_locks, xids = sampler.seen
            print(
                f"while previewing ({sampler.samples} samples): advisory locks {advisory},"
                f" row locks {row_locks}, transaction ids {xids} (target: 0, 0, 0)"
            )
            verdict = "exact" if Decimal(whole.delta) == moved else "DIFFERS"
            print(f"moved by the re-send {moved}, previewed {whole.delta}: {verdict}")
            batch_preview(env, ctx, args.batch_lines)
        finally:
            ctx.engine.dispose()
            broker.close()


if __name__ == "__main__":
    main()
