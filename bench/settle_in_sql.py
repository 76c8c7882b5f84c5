"""Settling where the data is: does the server settle a chunk for less CPU
than the worker does? (issue 45, step 1; docs/performance.md#tried-and-not-kept)

Stores deterministic 50,000-line promo_accrual jobs (5,000-line chunks) on the
machine's PostgreSQL, each under its own document ids, and settles them in
rounds, each path on a fresh job, alternated:

- ``python``: the settle stage as it is (``services/worker/stages.py``): the
  worker decodes, settles in ``Decimal``, hashes the keys and ``COPY``s the
  rows, with the marker, outcome rows, counters and outbox, then publishes the
  unit's events.
- ``staged``: as the issue drew it: the worker decodes the chunk (the kind's
  msgspec decoder) and ``COPY``s its lines into a temporary stage, then one
  statement computes each line's amount (``numeric``, rounded half up once at
  the cent), outcome within tolerance and reconciliation key (``sha256``) and
  ``INSERT ... SELECT``s the rows, ``RETURNING`` them; the worker makes and
  publishes their events.
- ``set-based``: the same statement reading the stored chunk's JSON in the
  server, so the worker does not decode it at all.
- ``server+COPY``: the server computes the same rows and sends them as ``COPY``
  text, which the worker ``COPY``s into the ledger unchanged (it parses each
  row once, for its event), then publishes the events.

The SQL paths do less than the stage (no lineage or booking locks, no
probes, no marker, outcome rows, counters or outbox): their figures are lower
bounds. ``server only`` is the server's reading and settling alone, nothing
written. Every row a SQL path wrote is checked against what the kind's Python
settlement makes of the same documents (key, amount, claim, outcome,
position), so what is timed is exact.

    python -m bench.settle_in_sql [--lines 50000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from bench.run import service_cpu
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import WorkerContext, make_context
from shared.adapters.db.bulk import field
from shared.adapters.db.stored_chunk import load_chunk
from shared.domain.kinds import KINDS
from shared.domain.pipeline.events import unit_events, unit_messages
from shared.domain.pipeline.units import ChunkOutcome, LedgerRow, UnitResult, chunk_start
from shared.domain.synthetic import promo_contract
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import isolated_env
from tests.support.workload import generate

# The stored chunk's lines, with their documents' fields, as scalars: carrying
# each document's JSON along every line made the sort by position spill to disk.
_LINES = """
WITH l AS MATERIALIZED (
  SELECT d.doc->>'document_id' AS document_id, d.doc->>'partition_key' AS pk,
         d.doc->>'period' AS period,
         coalesce(d.doc->>'correlation_id', left(encode(sha256(convert_to(
             %(job)s || '|' || (d.doc->>'document_id'), 'UTF8')), 'hex'), 32)) AS corr,
         x.line->>'line_no' AS line_no, x.line->>'sku' AS sku,
         coalesce(x.line->>'store_id', '') AS store_id,
         coalesce(x.line->>'transaction_date', '') AS tdate, x.line->>'promo_tier' AS tier,
         (x.line->>'qualifying_units')::numeric AS units,
         (x.line->>'claimed_amount')::numeric AS claimed,
         d.dn, x.ln
  FROM chunks c
  CROSS JOIN LATERAL jsonb_array_elements(convert_from(c.payload, 'UTF8')::jsonb)
      WITH ORDINALITY AS d(doc, dn)
  CROSS JOIN LATERAL jsonb_array_elements(d.doc->'lines') WITH ORDINALITY AS x(line, ln)
  WHERE c.id = %(chunk)s
), s AS (
  SELECT l.*, c.tolerance, %(start)s + row_number() OVER (ORDER BY dn, ln) - 1 AS position,
     round(units * (c.rates->>tier)::numeric, 2) AS amount,
     encode(sha256(convert_to(pk || '|' || document_id || '|' || encode(sha256(convert_to(
         line_no || '|' || sku || '|' || store_id || '|' || tdate, 'UTF8')), 'hex')
         || '|' || tier || '|' || period, 'UTF8')), 'hex') AS key
  FROM l JOIN jsonb_to_recordset(%(contracts)s::jsonb)
      AS c(partition_key text, rates jsonb, tolerance numeric) ON c.partition_key = l.pk
)
"""
_COLUMNS = (
    "reconciliation_key, contract_version, kind, partition_key, document_id, line_ref,"
    " job_id, outcome, amount, claimed_amount, delta, supersedes_id, correlation_id,"
    " position, period"
)
_ROWS = f"""{_LINES}
SELECT key, 1, 'promo_accrual', pk, document_id, line_no, %(job)s,
  CASE WHEN abs(claimed - amount) <= tolerance THEN 'posted' ELSE 'disputed' END,
  amount, claimed, amount, NULL, corr, position, %(period)s
FROM s ORDER BY key
"""
_SET_BASED = f"""{_LINES}
INSERT INTO ledger_entries ({_COLUMNS})
SELECT key, 1, 'promo_accrual', pk, document_id, line_no, %(job)s,
  CASE WHEN abs(claimed - amount) <= tolerance THEN 'posted' ELSE 'disputed' END,
  amount, claimed, amount, NULL, corr, position, %(period)s
FROM s ORDER BY key
RETURNING id, reconciliation_key, contract_version, outcome, kind, job_id, document_id,
  line_ref, partition_key, correlation_id, amount, claimed_amount, delta, supersedes_id, period
"""
_SERVER_ONLY = f"{_LINES} SELECT count(*), sum(amount), count(DISTINCT key) FROM s"
_STAGE_COLUMNS = (
    "document_id, pk, period, corr, line_no, sku, store_id, tdate, tier, units, claimed, position"
)
_STAGE = """
CREATE TEMP TABLE IF NOT EXISTS line_stage (
    document_id text, pk text, period text, corr text, line_no text, sku text, store_id text,
    tdate text, tier text, units numeric, claimed numeric, position bigint
) ON COMMIT DELETE ROWS
"""
_STAGED = f"""
WITH s AS (
  SELECT l.*, c.tolerance, round(units * (c.rates->>tier)::numeric, 2) AS amount,
     encode(sha256(convert_to(pk || '|' || document_id || '|' || encode(sha256(convert_to(
         line_no || '|' || sku || '|' || store_id || '|' || tdate, 'UTF8')), 'hex')
         || '|' || tier || '|' || period, 'UTF8')), 'hex') AS key
  FROM line_stage l JOIN jsonb_to_recordset(%(contracts)s::jsonb)
      AS c(partition_key text, rates jsonb, tolerance numeric) ON c.partition_key = l.pk
)
INSERT INTO ledger_entries ({_COLUMNS})
SELECT key, 1, 'promo_accrual', pk, document_id, line_no, %(job)s::text,
  CASE WHEN abs(claimed - amount) <= tolerance THEN 'posted' ELSE 'disputed' END,
  amount, claimed, amount, NULL, coalesce(corr, left(encode(sha256(convert_to(
      %(job)s::text || '|' || document_id, 'UTF8')), 'hex'), 32)), position, %(period)s
FROM s ORDER BY key
RETURNING id, reconciliation_key, contract_version, outcome, kind, job_id, document_id,
  line_ref, partition_key, correlation_id, amount, claimed_amount, delta, supersedes_id, period
"""
_IDS = """
SELECT array_to_string(
    ARRAY(SELECT nextval('ledger_entries_id_seq') FROM generate_series(1, %s)), ','
)
"""
PERIOD = "2026-12"


class Job:
    def __init__(self, ctx: WorkerContext, lines: int, tag: str, seed: int) -> None:
        generated = generate(lines, 50, seed=seed)
        for d in generated.documents:
            d["document_id"] = f"{tag}{seed}-{d['document_id']}"
        self.documents = generated.documents
        self.id, self.messages = store_job(
            ctx.engine, ctx.settings, ctx.internal_key, generated.documents
        )
        for message in self.messages:
            stages.validate_chunk(ctx, message, 1)
        with ctx.engine.connect() as conn:
            found = conn.exec_driver_sql(
                "SELECT id, seq, documents FROM chunks WHERE job_id = %(job)s", {"job": self.id}
            ).all()
        self.chunks = {chunk: (seq, documents) for chunk, seq, documents in found}

    def params(self, n: int, contracts: str) -> dict[str, Any]:
        chunk = self.messages[n]["chunk_id"]
        return {
            "chunk": chunk,
            "job": self.id,
            "contracts": contracts,
            "start": chunk_start(self.chunks[chunk][0]),
            "period": PERIOD,
        }


def measure(name: str, lines: int, run: Callable[[], None]) -> float:
    before = service_cpu()
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    services = {k: v - before[k] for k, v in service_cpu().items()}
    per = 1e6 / lines
    total = (cpu + sum(services.values())) * per
    print(
        f"{name:12} wall {wall * per:5.1f} µs/line  CPU: worker {cpu * per:5.1f}"
        f"  postgres {services['postgres'] * per:5.1f}  redis {services['redis'] * per:4.1f}"
        f"  rabbitmq {services['rabbitmq'] * per:4.1f}  all {total:5.1f}"
    )
    return total


def publish(ctx: WorkerContext, rows: list[LedgerRow]) -> None:
    rows.sort()
    result = UnitResult(ChunkOutcome(), dt.datetime.now(dt.UTC), rows, None)
    assert ctx.events is not None
    ctx.events.publish_messages(
        [], unit_messages(unit_events(result), ctx.settings.event_batch_max)
    )


def set_based(ctx: WorkerContext, job: Job, contracts: str) -> None:
    make = tuple.__new__
    for n in range(len(job.messages)):
        with ctx.engine.begin() as conn:
            raw: Any = conn.connection.dbapi_connection
            with raw.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
                cursor.execute(_SET_BASED, job.params(n, contracts))
                rows = [make(LedgerRow, r) for r in cursor.fetchall()]
        publish(ctx, rows)


def staged(ctx: WorkerContext, job: Job, contracts: str) -> None:
    make, decoder = tuple.__new__, KINDS["promo_accrual"].settle_decoder
    assert decoder is not None
    for n in range(len(job.messages)):
        params = job.params(n, contracts)
        with ctx.engine.begin() as conn:
            stored = load_chunk(conn, params["chunk"])
            assert stored is not None
            documents = decoder(stored.payload)
            assert documents is not None
            position, lines = params["start"], []
            for d in documents:
                head = f"{field(d.document_id)}\t{field(d.partition_key)}\t{field(d.period)}"
                head += f"\t{field(d.correlation_id)}\t"
                for line in d.lines:
                    day = line.transaction_date.isoformat() if line.transaction_date else ""
                    lines.append(
                        f"{head}{line.line_no}\t{field(line.sku)}\t{field(line.store_id or '')}"
                        f"\t{day}\t{field(line.promo_tier)}\t{field(line.qualifying_units)}"
                        f"\t{field(line.claimed_amount)}\t{position}\n"
                    )
                    position += 1
            raw: Any = conn.connection.dbapi_connection
            with raw.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
                cursor.execute(_STAGE)
                with cursor.copy(f"COPY line_stage ({_STAGE_COLUMNS}) FROM STDIN") as copy:
                    copy.write("".join(lines))
                cursor.execute(_STAGED, params)
                rows = [make(LedgerRow, r) for r in cursor.fetchall()]
        publish(ctx, rows)


def server_copy(ctx: WorkerContext, job: Job, contracts: str) -> None:
    make, number = tuple.__new__, Decimal
    for n in range(len(job.messages)):
        with ctx.engine.begin() as conn:
            raw: Any = conn.connection.dbapi_connection
            with raw.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
                text = bytearray()
                with cursor.copy(f"COPY ({_ROWS}) TO STDOUT", job.params(n, contracts)) as copy:
                    for block in copy:
                        text += block
                lines = bytes(text).decode().splitlines()
                found = cursor.execute(_IDS, (len(lines),)).fetchone()
                ids = found[0].split(",")
                with cursor.copy(f"COPY ledger_entries (id, {_COLUMNS}) FROM STDIN") as copy:
                    copy.write(
                        "".join(f"{i}\t{line}\n" for i, line in zip(ids, lines, strict=True))
                    )
        rows = []
        for i, line in zip(ids, lines, strict=True):
            f = line.split("\t")
            claimed = None if f[9] == "\\N" else number(f[9])
            corr = None if f[12] == "\\N" else f[12]
            values = (int(i), f[0], 1, f[7], f[2], f[6], f[4], f[5], f[3], corr)
            rows.append(
                make(LedgerRow, (*values, number(f[8]), claimed, number(f[10]), None, f[14]))
            )
        publish(ctx, rows)


def server_only(ctx: WorkerContext, job: Job, contracts: str) -> None:
    with ctx.engine.begin() as conn:
        raw: Any = conn.connection.dbapi_connection
        with raw.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
            for n in range(len(job.messages)):
                cursor.execute(_SERVER_ONLY, job.params(n, contracts)).fetchall()


def check(ctx: WorkerContext, job: Job, contracts: dict[str, Any]) -> None:
    """Every row of the job is what the kind's Python settlement makes of its line."""
    kind = KINDS["promo_accrual"]
    expected = {}
    documents = iter(job.documents)
    for seq, count in sorted(job.chunks.values()):
        position = chunk_start(seq)
        for _ in range(count):
            position = _expect(kind, next(documents), contracts, expected, position)
    with ctx.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT reconciliation_key, amount, claimed_amount, outcome, position"
            " FROM ledger_entries WHERE job_id = %(job)s",
            {"job": job.id},
        ).all()
    got = {k: (a, c, o, p) for k, a, c, o, p in found}
    assert got == expected, f"job {job.id}: the server's rows differ from the Python settlement"


def _expect(
    kind: Any, d: dict[str, Any], contracts: dict[str, Any], into: dict[str, Any], at: int
) -> int:
    document = kind.document_model.model_validate(d)
    contract = kind.contract_model.model_validate(contracts[d["partition_key"]])
    for line in kind.lines(document):
        s = kind.settle(document, line, contract)
        into[line.reconciliation_key] = (s.amount, s.claimed_amount, s.outcome, at)
        at += 1
    return at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with isolated_env("sqlsettle") as env:
        settings = env.settings(max_chunk_documents=250, relay_grace_s=0)
        broker = build_broker(settings)
        ctx = make_context(settings, broker)
        try:
            vendors = sorted({d["partition_key"] for d in generate(args.lines, 50).documents})
            publish_promo_contracts(ctx.engine, vendors)
            contract = promo_contract()
            by_vendor = {v: contract for v in vendors}
            contracts = json.dumps(
                [
                    {"partition_key": v, "rates": c["tier_rates"], "tolerance": c["tolerance"]}
                    for v, c in by_vendor.items()
                ]
            )
            totals: dict[str, list[float]] = {}
            seed = 600
            for _ in range(args.rounds):
                for name, path in (
                    ("python", None),
                    ("staged", staged),
                    ("set-based", set_based),
                    ("server+COPY", server_copy),
                    ("server only", server_only),
                ):
                    seed += 1
                    job = Job(ctx, args.lines, name[0].upper(), seed)

                    def run(job: Job = job, path: Any = path) -> None:
                        if path is None:
                            for message in job.messages:
                                stages.settle_chunk(ctx, message, 1)
                        else:
                            path(ctx, job, contracts)

                    totals.setdefault(name, []).append(measure(name, args.lines, run))
                    if path in (staged, set_based, server_copy):
                        check(ctx, job, by_vendor)
            print("median CPU µs a line, every process and service:")
            for name, figures in totals.items():
                print(f"  {name:12} {sorted(figures)[len(figures) // 2]:5.1f}")
        finally:
            ctx.engine.dispose()
            broker.close()


if __name__ == "__main__":
    main()
