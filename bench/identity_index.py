"""What each index on a posted line costs a large ledger (issue 45, step 2;
docs/performance.md#tried-and-not-kept).

Fills the ledger of the bench's tuned PostgreSQL with ``--ledger-rows`` rows of
history (``bench/ledger_fill.py``, default 20,000,000), then, in ``--rounds``
rounds, alternated, inserts ``--rows`` new promo rows (random keys, sorted by
key as settlement sends them, ``COPY``'d in 5,000-row transactions, each a
durable commit) under each variant of the ledger's indexes:

- ``today``: the four B-trees a posted line enters (the primary key, the
  identity's 64-character hex key and version, the job's lines in batch order,
  the document's lines);
- ``32-byte key``: the identity's unique index on the key's 32 bytes
  (``decode(reconciliation_key, 'hex')``) instead of its hex text;
- ``no job index`` / ``no document index``: today's without that index (what
  that index costs a row).

Prints, for each, PostgreSQL's CPU and the wall time a row inserted, and the
size of the identity's index (MiB, and bytes a row). A variant's indexes are
built before its batch and outside its timing.

    python -m bench.identity_index [--ledger-rows 20000000] [--rows 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time

import psycopg

from bench.ledger_fill import fill
from bench.run import service_cpu
from bench.server import describe, server
from tests.support.infra import isolated_env

IDENTITY = "uq_ledger_entries_identity"
_PARTIAL = "WHERE outcome IN ('posted', 'disputed')"
_HEX = (
    f"CREATE UNIQUE INDEX {IDENTITY} ON ledger_entries"
    f" (reconciliation_key, contract_version) {_PARTIAL}"
)
_BYTES = (
    f"CREATE UNIQUE INDEX {IDENTITY} ON ledger_entries"
    f" (decode(reconciliation_key, 'hex'), contract_version) {_PARTIAL}"
)
_COLUMNS = (
    "reconciliation_key, contract_version, kind, partition_key, document_id, line_ref,"
    " job_id, outcome, amount, claimed_amount, delta, correlation_id, position, period"
)
CHUNK = 5_000


def other_indexes(conn: psycopg.Connection) -> dict[str, str]:
    """The ledger's indexes on a posted line besides the key's and the primary key: name → DDL."""
    found = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'ledger_entries'"
        " AND indexname NOT IN (%s, 'pk_ledger_entries') AND indexdef NOT LIKE '%%WHERE%%'",
        (IDENTITY,),
    ).fetchall()
    return dict(found)


class Shape:
    """The ledger's indexes, changed from one variant to the next by the least
    building (a 20,000,000-row index takes a minute or two)."""

    def __init__(self, conn: psycopg.Connection, others: dict[str, str]) -> None:
        self.conn, self.others = conn, others
        self.identity, self.without = _HEX, None

    def make(self, identity: str, without: str | None) -> None:
        if identity != self.identity:
            self.conn.execute(f"DROP INDEX {IDENTITY}")
            self.conn.execute(identity)
            self.identity = identity
        if without != self.without:
            if self.without is not None:
                self.conn.execute(self.others[self.without])
            if without is not None:
                self.conn.execute(f"DROP INDEX {without}")
            self.without = without
        self.conn.execute("CHECKPOINT")


def rows_text(batch: int, n: int) -> list[str]:
    """``n`` new posted promo rows of batch ``batch``, in 5,000-row chunks, each sorted by key."""
    chunks = []
    for start in range(0, n, CHUNK):
        lines = []
        for i in range(start, min(n, start + CHUNK)):
            key = hashlib.sha256(f"bench-identity|{batch}|{i}".encode()).hexdigest()
            vendor, document = f"VENDOR-{i % 50:04d}", f"B{batch}-{i // 20:07d}"
            amount = f"{i % 997}.{i % 100:02d}"
            lines.append(
                f"{key}\t1\tpromo_accrual\t{vendor}\t{document}\t{i % 20 + 1}\tjob-{batch}"
                f"\tposted\t{amount}\t{amount}\t{amount}\t\\N\t{i}\t2026-12\n"
            )
        lines.sort()
        chunks.append("".join(lines))
    return chunks


def insert(conn: psycopg.Connection, chunks: list[str]) -> tuple[float, float]:
    """COPY the chunks, one durable transaction each; PostgreSQL's CPU and the wall time, in s."""
    server_cpu, wall = service_cpu()["postgres"], time.perf_counter()
    for text in chunks:
        with (
            conn.transaction(),
            conn.cursor().copy(f"COPY ledger_entries ({_COLUMNS}) FROM STDIN") as copy,
        ):
            copy.write(text)
    return service_cpu()["postgres"] - server_cpu, time.perf_counter() - wall


def identity_size(conn: psycopg.Connection) -> tuple[float, float]:
    size, rows = conn.execute(
        "SELECT pg_relation_size(%s::regclass), (SELECT count(*) FROM ledger_entries)", (IDENTITY,)
    ).fetchone()  # type: ignore[misc]
    return size / 2**20, size / rows


def _label(index: str) -> str:
    return "no document index" if "document" in index else "no job-lines index"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledger-rows", type=int, default=20_000_000)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with server("tuned") as admin:
        print(describe("tuned", admin))
        with isolated_env("identity", admin) as env:
            print(fill(env.database_url, args.ledger_rows).report())
            with psycopg.connect(env.database_url, autocommit=True) as conn:
                conn.execute("SET maintenance_work_mem = '1GB'")
                others = other_indexes(conn)
                variants = {
                    "today": (_HEX, None),
                    "32-byte key": (_BYTES, None),
                    **{_label(name): (_HEX, name) for name in others},
                }
                figures: dict[str, list[tuple[float, float]]] = {}
                batch = 0
                shape = Shape(conn, others)
                for _ in range(args.rounds):
                    for name, (identity, without) in variants.items():
                        shape.make(identity, without)
                        mib, per_row = identity_size(conn)
                        batch += 1
                        server_s, wall_s = insert(conn, rows_text(batch, args.rows))
                        per = 1e6 / args.rows
                        figures.setdefault(name, []).append((server_s * per, wall_s * per))
                        print(
                            f"{name:20} identity index {mib:7.0f} MiB ({per_row:4.1f} B a row)"
                            f"  PostgreSQL {server_s * per:5.1f} µs a row, wall {wall_s * per:5.1f}"
                        )
                shape.make(_HEX, None)
            print("medians, µs a row inserted (PostgreSQL CPU / wall):")
            for name, values in figures.items():
                cpu = statistics.median(v[0] for v in values)
                wall = statistics.median(v[1] for v in values)
                print(f"  {name:20} {cpu:5.1f} / {wall:5.1f}")


if __name__ == "__main__":
    main()
