"""A fourth kind is one module and one line in the registry
(docs/architecture.md#settlement-kinds): a toy kind, registered for this test
only, goes from the front door to the ledger, the job's lines CSV and the
formatted output with no other file changed.

The toy is as different from the three as a kind can be and still settle:
its own partition noun, line reference and quantum (0.001, which no real kind
has, so its places cannot come from anywhere but its Kind). It runs in
process: the batch is POSTed to the app, its chunks taken off the real
RabbitMQ queues and run through the fast path and settlement on the real
PostgreSQL and Redis."""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, ClassVar, Literal

import pika
import pytest
from fastapi.testclient import TestClient
from pydantic import Field
from sqlalchemy import select

from services.api.app import create_app
from services.api.routes.kinds import kind_infos
from services.commands.money import money
from services.worker.actors import build_broker
from services.worker.context import WorkerContext, make_context
from services.worker.stages import settle_chunk, validate_chunk
from shared.adapters.db import tables
from shared.domain.keys import sha256_hex
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import (
    Document,
    Kind,
    Line,
    LineCell,
    Ordinal,
    Price,
    Settlement,
    WireModel,
)
from shared.domain.money import Money, Quantity, exact_distance, exact_product
from shared.domain.signing import sign_request
from tests.support.factories import uid
from tests.support.infra import (
    BROKER_URL,
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
    isolated_env,
)

MIL = Decimal("0.001")


class ToyLine(WireModel):
    line_no: Ordinal
    units: Quantity
    claimed_amount: Money


class ToyDocument(Document):
    lines: list[ToyLine] = Field(min_length=1)


class ToyBatch(WireModel):
    kind: Literal["toy_rebate"]
    documents: list[ToyDocument] = Field(min_length=1)


class ToyContract(WireModel):
    rate: Price
    tolerance: Price


class ToyRebate(Kind[ToyDocument, ToyContract]):
    name: ClassVar[str] = "toy_rebate"
    quantum: ClassVar[Decimal] = MIL
    partition_noun: ClassVar[str] = "store"
    line_ref_name: ClassVar[str] = "line_no"
    document_model = ToyDocument
    contract_model = ToyContract
    batch_model = ToyBatch
    keys_name_document = True  # each key starts with its partition and document id
    line_columns = ("units",)

    def lines(self, document: ToyDocument) -> list[Line]:
        return [
            Line(
                document.document_id,
                str(line.line_no),
                sha256_hex(document.partition_key, document.document_id, line.line_no),
                line.claimed_amount,
                line,
            )
            for line in document.lines
        ]

    def line_cells(self, document: ToyDocument) -> list[tuple[LineCell, ...]]:
        return [(line.units,) for line in document.lines]

    def settle(self, document: ToyDocument, line: Line, contract: ToyContract) -> Settlement:
        toy: ToyLine = line.raw
        model = exact_product(toy.units, contract.rate, self.quantum)
        within = exact_distance(toy.claimed_amount, model) <= contract.tolerance
        return Settlement("posted" if within else "disputed", model, toy.claimed_amount)


@pytest.fixture(scope="module")
def toy_kind() -> Iterator[ToyRebate]:
    """The toy in the registry for this module only: every reader takes a kind
    from ``KINDS`` by its name, so one line there is all it takes."""
    toy = ToyRebate()
    KINDS[toy.name] = toy
    try:
        yield toy
    finally:
        del KINDS[toy.name]


@pytest.fixture(scope="module")
def env(toy_kind: ToyRebate) -> Iterator[ServiceEnv]:
    with isolated_env("toy") as service_env:
        yield service_env


@pytest.fixture(scope="module")
def ctx(env: ServiceEnv) -> Iterator[WorkerContext]:
    settings = env.settings()
    broker = build_broker(settings)
    context = make_context(settings, broker)
    try:
        yield context
    finally:
        context.engine.dispose()
        broker.close()


def _take(ctx: WorkerContext, family: str) -> list[Any]:
    """The messages waiting on a tier's queue (the actor's argument of each)."""
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        channel = connection.channel()
        taken, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline:
            method, _, body = channel.basic_get(ctx.settings.queue_name(family), auto_ack=True)
            if method is None:
                if taken:
                    break
                time.sleep(0.1)
                continue
            taken.append(json.loads(body)["args"][0])
        return taken
    finally:
        connection.close()


def _body(media: str, document: dict[str, Any]) -> bytes:
    """The batch of one ``document`` as ``media``: JSON, or NDJSON's header line
    and then the document's."""
    if media == "application/json":
        return json.dumps({"kind": "toy_rebate", "documents": [document]}).encode()
    return (json.dumps({"kind": "toy_rebate"}) + "\n" + json.dumps(document) + "\n").encode()


# Both bodies: the JSON one is validated by the batch adapter of the kinds
# registered now, the NDJSON one document by document by the kind's model.
@pytest.mark.parametrize("media", ["application/json", "application/x-ndjson"])
def test_a_toy_kind_settles_from_the_front_door_to_the_csv(
    toy_kind: ToyRebate, env: ServiceEnv, ctx: WorkerContext, media: str
) -> None:
    store = uid("STORE-")
    with TestClient(create_app(env.settings())) as http:
        contract = {"rate": "0.3333", "tolerance": "0.001"}
        put = http.put(
            f"/v1/contracts/toy_rebate/{store}/1",
            json=contract,
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        )
        assert put.status_code in (200, 201), put.text
        lines = [
            {"line_no": 1, "units": "7", "claimed_amount": "2.333"},  # 7 x 0.3333 = 2.3331
            {"line_no": 2, "units": "1000", "claimed_amount": "333.000"},  # model 333.300
        ]
        document = {"document_id": uid("T-"), "partition_key": store, "contract_version": 1}
        body = _body(media, {**document, "lines": lines})
        signature = sign_request(PRODUCER_SECRET, int(time.time()), "POST", "/v1/batches", body)
        posted = http.post(
            "/v1/batches",
            content=body,
            headers={
                "X-Key-Id": PRODUCER_ID,
                "X-Signature": signature,
                "Content-Type": media,
            },
        )
        assert posted.status_code == 202, posted.text
        job_id = posted.json()["job_id"]

        for message in _take(ctx, "fast_path"):
            validate_chunk(ctx, message, 1)
        for message in _take(ctx, "compute_heavy"):
            settle_chunk(ctx, message, 1)

        with ctx.engine.connect() as conn:
            rows = conn.execute(
                select(
                    tables.ledger_entries.c.kind,
                    tables.ledger_entries.c.line_ref,
                    tables.ledger_entries.c.outcome,
                    tables.ledger_entries.c.amount,
                ).where(tables.ledger_entries.c.job_id == job_id)
            ).all()
        assert sorted((r.line_ref, r.outcome, r.amount) for r in rows) == [
            ("1", "posted", Decimal("2.333")),  # rounded once, half up, at 0.001
            ("2", "disputed", Decimal("333.300")),
        ]
        assert {r.kind for r in rows} == {"toy_rebate"}

        viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
        job = http.get(f"/v1/jobs/{job_id}", headers=viewer).json()
        assert job["state"] == "completed" and job["outcomes"]["posted"] == 1, job
        answer = http.get(f"/v1/jobs/{job_id}/lines.csv", headers={**viewer, "Accept": "text/csv"})
        assert answer.status_code == 200, answer.text
        csv_rows = list(csv.DictReader(io.StringIO(answer.text, newline="")))
        assert [(r["line_ref"], r["amount"], r["units"]) for r in csv_rows] == [
            ("1", "2.333", "7"),
            ("2", "333.300", "1000"),
        ]
        kinds = http.get("/v1/kinds", headers=viewer).json()
        assert {"name": "toy_rebate", "places": 3, "partition_noun": "store"}.items() <= next(
            k for k in kinds if k["name"] == "toy_rebate"
        ).items()
    assert next(i for i in kind_infos() if i.name == "toy_rebate").places == 3
    assert money("1234.5", "toy_rebate") == "1,234.500"  # the CLI, at the toy's quantum


def test_the_published_batch_schema_holds_the_toy_kind(
    toy_kind: ToyRebate, env: ServiceEnv
) -> None:
    """The OpenAPI document is written from the registry as it is when the app
    writes it, not as it was at import."""
    document = create_app(env.settings()).openapi()
    body = document["paths"]["/v1/batches"]["post"]["requestBody"]["content"]
    assert "ToyBatch" in document["components"]["schemas"]
    assert "#/components/schemas/ToyBatch" in json.dumps(body["application/json"]["schema"])
