"""The floor: the least work exactly-once posting needs, in one process.

On the same promo lines ``bench.run`` posts, and on the same PostgreSQL
server, one process

- decodes the NDJSON, document by document;
- settles each line in ``Decimal`` (units × the tier's rate, rounded half up
  to the cent once, posted within the tolerance of the claim, else disputed);
- hashes its reconciliation key (SHA-256 over the promo fields of
  docs/architecture.md#reconciliation-keys);
- ``COPY``s 5,000-line chunks into a table with one unique B-tree (the key and
  version), one commit each (durable: ``synchronous_commit`` on).

It is written apart from settleq on purpose: what it costs is what any
exactly-once poster of these lines must spend, so settleq's lines/s over the
floor's, measured in the same invocation, is the figure a machine's speed does
not move (``bench.run`` prints it).

    python -m bench.floor                  # 500,000 lines, a private tuned cluster
    python -m bench.floor --lines 100000 --postgres machine
"""

from __future__ import annotations

import argparse
import hashlib
import time
import uuid
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from bench.procstats import TICK
from bench.server import SERVERS, describe, server
from tests.support.infra import create_database, drop_database
from tests.support.workload import CONTRACT, generate, ndjson

CHUNK_LINES = 5000
CENT = Decimal("0.01")
_RATES = {tier: Decimal(rate) for tier, rate in CONTRACT["tier_rates"].items()}  # type: ignore[attr-defined]
_TOLERANCE = Decimal(str(CONTRACT["tolerance"]))
_TABLE = """
CREATE TABLE floor_ledger (
    reconciliation_key varchar(64) COLLATE "C" NOT NULL,
    contract_version integer NOT NULL,
    document_id varchar(128) NOT NULL,
    line_ref varchar(128) NOT NULL,
    outcome varchar(16) NOT NULL,
    amount numeric(20,4) NOT NULL,
    claimed_amount numeric(20,4),
    UNIQUE (reconciliation_key, contract_version)
)
"""
_COLUMNS = (
    "reconciliation_key, contract_version, document_id, line_ref, outcome, amount, claimed_amount"
)


@dataclass
class Floor:
    """What the floor took."""

    lines: int
    seconds: float  # wall, from the first decode to the last commit
    cpu_s: float  # this process's CPU in that time
    chunks: int
    server_cpu_s: float  # its PostgreSQL backend's CPU in that time

    @property
    def rate(self) -> float:
        return self.lines / self.seconds

    @property
    def rate_per_core(self) -> float:
        """lines/s per core-second: the lines over the CPU of both processes."""
        return self.lines / (self.cpu_s + self.server_cpu_s)

    def report(self) -> str:
        per_line = 1e6 / self.lines
        return (
            f"floor: {self.lines:,} lines in {self.seconds:.2f} s, {self.rate:,.0f} lines/s;"
            f" {self.rate_per_core:,.0f} lines per core-second of CPU"
            f" ({self.cpu_s * per_line:.1f} µs a line in the floor,"
            f" {self.server_cpu_s * per_line:.1f} in its PostgreSQL backend;"
            f" {self.chunks} commits)"
        )


def backend_cpu(pid: int) -> float:
    """CPU seconds so far of a PostgreSQL backend on this machine (every server
    the bench uses is local)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def settle(partition: str, document: dict[str, Any], line: dict[str, Any]) -> tuple[str, str, str]:
    """One promo line: its reconciliation key, outcome and amount (text)."""
    rates, tolerance = _RATES, _TOLERANCE
    units = Decimal(line["qualifying_units"])
    model = (units * rates[line["promo_tier"]]).quantize(CENT, rounding=ROUND_HALF_UP)
    claimed = Decimal(line["claimed_amount"])
    outcome = "posted" if abs(claimed - model) <= tolerance else "disputed"
    item = "|".join(
        (
            str(line["line_no"]),
            line["sku"],
            line.get("store_id") or "",
            line.get("transaction_date") or "",
        )
    )
    item_hash = hashlib.sha256(item.encode()).hexdigest()
    key = hashlib.sha256(
        "|".join(
            (partition, document["document_id"], item_hash, line["promo_tier"], document["period"])
        ).encode()
    ).hexdigest()
    return key, outcome, str(model)


def measure_floor(database_url: str, body: bytes) -> Floor:
    """Run the floor over the NDJSON ``body`` into a table of its own in
    ``database_url`` (created and dropped here)."""
    url = database_url.replace("postgresql+psycopg://", "postgresql://")
    decode = msgspec.json.decode
    with psycopg.connect(url) as conn:
        conn.execute("DROP TABLE IF EXISTS floor_ledger")
        conn.execute(_TABLE)
        conn.commit()
        lines = chunks = 0
        rows: list[str] = []
        backend = conn.info.backend_pid
        wall, cpu, server_cpu = time.perf_counter(), time.process_time(), backend_cpu(backend)

        def flush() -> None:
            nonlocal chunks
            with (
                conn.cursor() as cursor,
                cursor.copy(f"COPY floor_ledger ({_COLUMNS}) FROM STDIN") as copy,
            ):
                copy.write("".join(rows).encode())
            conn.commit()
            rows.clear()
            chunks += 1

        for raw in body.split(b"\n")[1:]:  # the first line names the kind
            if not raw:
                continue
            document = decode(raw)
            partition = document["partition_key"]
            doc_id = document["document_id"]
            for line in document["lines"]:
                key, outcome, amount = settle(partition, document, line)
                rows.append(
                    f"{key}\t1\t{doc_id}\t{line['line_no']}\t{outcome}\t{amount}"
                    f"\t{line['claimed_amount']}\n"
                )
                lines += 1
                if len(rows) == CHUNK_LINES:
                    flush()
        if rows:
            flush()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server_cpu = backend_cpu(backend) - server_cpu
        conn.execute("DROP TABLE floor_ledger")
        conn.commit()
    return Floor(lines, wall, cpu, chunks, server_cpu)


def floor_on(admin: str, body: bytes) -> Floor:
    """The floor in a database of its own on the server of ``admin``."""
    name = f"settleq_floor_{uuid.uuid4().hex[:10]}"
    url = create_database(name, admin)
    try:
        return measure_floor(url, body)
    finally:
        drop_database(name, admin)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=500_000)
    parser.add_argument("--vendors", type=int, default=50)
    parser.add_argument("--postgres", choices=[s for s in SERVERS if s != "both"], default="tuned")
    args = parser.parse_args()
    data = generate(args.lines, args.vendors)
    body = ndjson(data.documents)
    with server(args.postgres) as admin:
        print(describe(args.postgres, admin))
        print(floor_on(admin, body).report())


if __name__ == "__main__":
    main()
