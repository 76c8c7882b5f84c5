"""What the chaos suite counts after its faults: the ledger, the job's counters
and the outcome events a consumer received (docs/architecture.md#exactly-once-effect,
docs/architecture.md#nothing-lost)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pika
from sqlalchemy import Engine, func, select, text

from shared.adapters.db import tables
from shared.adapters.rabbitmq.broker import connection_parameters
from tests.support.events import distinct, drain
from tests.support.infra import BROKER_URL
from tests.support.stack import Stack
from tests.support.workload import CONTRACT, Expectation, Generated, ndjson

ledger = tables.ledger_entries
UNRANGED = text(
    """
SELECT count(*) FROM ledger_entries l WHERE l.job_id = :job_id AND (
    NOT EXISTS (SELECT 1 FROM ledger_job_ranges r
                WHERE r.job_id = l.job_id AND l.id BETWEEN r.first_id AND r.last_id)
    OR NOT EXISTS (SELECT 1 FROM ledger_document_ranges d
                   WHERE d.document_id = l.document_id AND d.partition_key = l.partition_key
                     AND l.id BETWEEN d.first_id AND d.last_id))
"""
)


def wait_for(read: Callable[[], Any], done: Callable[[Any], bool], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = read()
            if done(value):
                return value
        except Exception:  # the service under test may be mid-fault
            value = None
        assert time.monotonic() < deadline, f"timed out; last seen {value!r}"
        time.sleep(0.5)


def unpublished(engine: Engine) -> int:
    outbox = tables.outbox
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    outbox.c.published_at.is_(None), outbox.c.type == tables.OUTCOME
                )
            ).scalar_one()
        )


# (reconciliation_key, contract_version) pairs with more than one ledger row.
DOUBLED = select(func.count()).select_from(
    select(ledger.c.reconciliation_key)
    .group_by(ledger.c.reconciliation_key, ledger.c.contract_version)
    .having(func.count() > 1)
    .subquery()
)


def publish_contracts(stack: Stack, documents: Iterable[dict[str, Any]]) -> None:
    operator = stack.operator()
    for vendor in sorted({d["partition_key"] for d in documents}):
        response = operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
        assert response.status_code in (200, 201), response.text


def submit_documents(stack: Stack, documents: list[dict[str, Any]]) -> str:
    body = json.dumps({"kind": "promo_accrual", "documents": documents}).encode()
    response = stack.producer().submit(body)
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


def submit_claim(stack: Stack, data: Generated) -> str:
    """The workload's contracts, its earlier quarter settled, then the claim
    itself accepted as NDJSON (not waited for): the claim's job id."""
    publish_contracts(stack, data.documents + data.earlier)
    producer = stack.producer()
    producer.wait(submit_documents(stack, data.earlier), timeout=300)
    response = producer.submit(ndjson(data.documents), content_type="application/x-ndjson")
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


@dataclass
class Census:
    """The ledger and the job, counted after the faults."""

    job: dict[str, Any]
    outcomes: dict[str, tuple[int, Decimal, Decimal]]  # outcome: rows, amount, claimed
    doubled: int  # (reconciliation_key, contract_version) pairs with more than one row
    ledger_rows: int  # in the whole database: each row is one outcome event
    result_rows: int  # the job's processed markers (one per chunk)
    # The job's rows no range of their job or of their document holds: rows its
    # lines page, GET /v1/lines and a remittance's match would not find.
    unranged: int = 0

    @classmethod
    def take(cls, engine: Engine, job: dict[str, Any]) -> Census:
        results = tables.chunk_results
        with engine.connect() as conn:
            sums = (func.count(), func.sum(ledger.c.amount), func.sum(ledger.c.claimed_amount))
            rows = conn.execute(
                select(ledger.c.outcome, *sums)
                .where(ledger.c.job_id == job["job_id"])
                .group_by(ledger.c.outcome)
            ).all()
            doubled = conn.execute(DOUBLED).scalar_one()
            ledger_rows = conn.execute(select(func.count()).select_from(ledger)).scalar_one()
            result_rows = conn.execute(
                select(func.count()).where(
                    results.c.job_id == job["job_id"], results.c.source == "chunk"
                )
            ).scalar_one()
            unranged = conn.execute(UNRANGED, {"job_id": job["job_id"]}).scalar_one()
        outcomes = {r[0]: (int(r[1]), r[2], r[3]) for r in rows}
        return cls(job, outcomes, int(doubled), int(ledger_rows), int(result_rows), int(unranged))

    @property
    def terminal(self) -> int:
        return sum(self.job["outcomes"].values())

    def totals(self, lines: int, exact: bool, delivered: int, elapsed: float) -> list[str]:
        """The table under the faults' in a ``chaos:`` report: what survived them."""
        facts = {
            "lines accepted": f"{self.job['lines']:,}",
            "lines lost": f"{lines - self.terminal:,}",
            "identities duplicated in the ledger": f"{self.doubled:,}",
            "rows outside their job's or document's ranges": f"{self.unranged:,}",
            "counters exact": "yes" if exact else "no",
            "job outcomes": json.dumps(self.job["outcomes"]),
            "events committed and published (ledger rows; outbox left 0)": f"{self.ledger_rows:,}",
            "events delivered (distinct ids)": f"{delivered:,}",
            "wall time": f"{elapsed:.0f} s",
        }
        return ["| total | value |", "|---|---:|", *(f"| {k} | {v} |" for k, v in facts.items())]

    def counters_exact(self, lines: int, expect: Expectation) -> bool:
        """The job's counters and sums equal the expectation and the ledger's rows,
        and every row of the job is in its job's and its document's ranges."""
        job, zero = self.job, (0, Decimal(0), Decimal(0))
        posted, disputed = self.outcomes.get("posted", zero), self.outcomes.get("disputed", zero)
        return (
            self.unranged == 0
            and job["lines"] == lines == self.terminal
            and job["outcomes"]["posted"] == expect.posted == posted[0]
            and job["outcomes"]["disputed"] == expect.disputed == disputed[0]
            and job["outcomes"]["duplicate"] == expect.duplicate
            and job["outcomes"]["dead_lettered"] == 0
            and Decimal(job["amounts"]["posted"]) == expect.amount_posted == posted[1]
            and Decimal(job["amounts"]["disputed"]) == expect.amount_disputed == disputed[2]
        )


class EventsQueue:
    """A consumer's durable queue bound to every settlement event (it survives
    the RabbitMQ restart)."""

    def __init__(
        self, prefix: str, broker_url: str = BROKER_URL, arguments: dict[str, Any] | None = None
    ) -> None:
        """``broker_url`` may list a cluster's nodes; ``arguments`` declare the
        queue (``{"x-queue-type": "quorum"}`` to outlive a node)."""
        self.exchange = f"{prefix}.events"
        self.queue = f"{prefix}.chaos-consumer"
        self.nodes = connection_parameters(broker_url)
        connection = pika.BlockingConnection(self.nodes)
        channel = connection.channel()
        channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
        channel.queue_declare(self.queue, durable=True, arguments=arguments)
        channel.queue_bind(self.queue, self.exchange, routing_key="settlement.#")
        connection.close()

    def drain(self) -> set[str]:
        """The distinct event ids delivered: each message carries a batch of them."""
        connection = pika.BlockingConnection(self.nodes)
        try:
            return set(distinct(drain(connection.channel(), self.queue)))
        finally:
            connection.close()

    def close(self) -> None:
        connection = pika.BlockingConnection(self.nodes)
        channel = connection.channel()
        channel.queue_delete(self.queue)
        channel.exchange_delete(self.exchange)
        connection.close()
