"""A document older than what its identity already has changes nothing
(docs/architecture.md#re-pricing-lineage-and-advisory-locks):
a lower contract version than its key's newest row (promo, freight), an
earlier ``effective_at`` than its (recipe, location)'s newest row (recipe).
Its lines are ``duplicate`` with reason ``newer_version_settled``; it writes
no ledger row and no event; the newer row, and its open dispute, still count.

On each ledger backend, through the settlement transaction: on PostgreSQL a
promo or freight chunk takes the one settle statement (bulk_settle.py), a
recipe chunk or a chunk holding a key under two versions the portable rounds
(inserts.py), which SQLite always takes. The race of v1 and v2 committing at
once needs PostgreSQL (SQLite runs one writer at a time).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.disputes import queue as disputes
from shared.adapters.db.jobs.lines import list_lines
from shared.adapters.db.jobs.queries import job_status
from shared.domain.disputes import ResolveRequest
from tests.support.disputes import (
    ACTOR,
    delta_sums,
    disputed_doc,
    job_disputes,
    new_vendor,
    planned,
    settle,
)
from tests.support.factories import store_job, uid
from tests.support.infra import VIEWER_TOKEN, ServiceEnv
from tests.support.ledger import commit_plan
from tests.support.races import race

ledger = tables.ledger_entries
LATE = "newer_version_settled"


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    """The API on the backend's ledger: what a user reads of a job."""
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


def read(http: TestClient, path: str) -> Any:
    response = http.get(path, headers={"Authorization": f"Bearer {VIEWER_TOKEN}"})
    assert response.status_code == 200, response.text
    return response.json()


def assert_late(http: TestClient, job_id: str, refs: list[str]) -> None:
    """Every line of the job is a duplicate of an identity settled newer
    (``newer_version_settled``), counted so, and the job adds up."""
    job = read(http, f"/v1/jobs/{job_id}")
    assert job["state"] == "completed"
    assert job["outcomes"] == {
        "posted": 0,
        "disputed": 0,
        "duplicate": len(refs),
        "dead_lettered": 0,
    }
    assert job["lines"] == sum(job["outcomes"].values())
    items = read(http, f"/v1/jobs/{job_id}/lines")["items"]
    assert [(i["line_ref"], i["outcome"], i["reason"]) for i in items] == [
        (ref, "duplicate", LATE) for ref in refs
    ]


def identity_rows(engine: Engine, **where: str) -> list[Any]:
    """The posted and disputed rows matching ``where``, oldest first."""
    query = select(ledger).where(
        ledger.c.outcome.in_(tables.IDENTITY_OUTCOMES),
        *(ledger.c[name] == value for name, value in where.items()),
    )
    with engine.connect() as conn:
        return list(conn.execute(query.order_by(ledger.c.id)).all())


def events(engine: Engine) -> int:
    """Outcome units: each lists the events of one committed unit."""
    o = tables.outbox
    with engine.connect() as conn:
        units = select(func.count()).select_from(o).where(o.c.type == tables.OUTCOME)
        return int(conn.execute(units).scalar_one())


# ---------------------------------------------------------------- promo


@pytest.mark.both_backends
@pytest.mark.regression
def test_a_late_v1_of_a_disputed_v2_promo_document_changes_nothing(
    engine: Engine, http: TestClient
) -> None:
    """Issue 29 item 3 (G3): v2 is disputed, then v1 of the same document comes.
    v1's lines are duplicates; the v2 rows stay the newest, their disputes open
    and resolvable."""
    vendor, doc_id = new_vendor(engine), uid("INV-")
    v2 = disputed_doc(vendor, ["1.50", "1.60"], 2, doc_id)  # v2 pays 2.00 a line
    newer = settle(engine, [v2])
    first, second = job_disputes(engine, newer, [v2])
    before = events(engine)

    late = settle(engine, [disputed_doc(vendor, ["1.50", "1.60"], 1, doc_id)])

    assert_late(http, late, ["1", "2"])
    rows = identity_rows(engine, partition_key=vendor, document_id=doc_id)
    assert {(r.id, r.contract_version, r.job_id) for r in rows} == {
        (first, 2, newer),
        (second, 2, newer),
    }
    assert events(engine) == before
    assert disputes.statuses(engine, [first, second]) == {first: "open", second: "open"}
    resolved = disputes.resolve(engine, first, ResolveRequest("accept_claim", "v2 stands"), ACTOR)
    assert resolved.created
    assert disputes.statuses(engine, [first, second]) == {first: "resolved", second: "open"}
    keys = {r.reconciliation_key for r in rows}
    assert all(total == latest for total, latest in delta_sums(engine, keys).values())


@pytest.mark.both_backends
@pytest.mark.regression
def test_v1_and_v2_in_one_chunk_after_v3_are_both_late(engine: Engine, http: TestClient) -> None:
    """A chunk holding a key under two versions takes the portable rounds on
    every backend: v1 then v2, each judged against v3, the newest."""
    vendor, doc_id = new_vendor(engine), uid("INV-")
    newer = settle(engine, [disputed_doc(vendor, ["4.00"], 3, doc_id)])  # v3 pays 4.00
    [v3_row] = identity_rows(engine, partition_key=vendor, document_id=doc_id)

    late = settle(engine, [disputed_doc(vendor, ["1.00"], v, doc_id) for v in (2, 1)])

    assert_late(http, late, ["1", "1"])
    [row] = identity_rows(engine, partition_key=vendor, document_id=doc_id)
    assert (row.id, row.job_id, row.outcome) == (v3_row.id, newer, "posted")


@pytest.mark.both_backends
@pytest.mark.regression
def test_a_late_document_sent_twice_in_one_batch_is_late_twice(
    engine: Engine, http: TestClient
) -> None:
    """The repeat is a duplicate within the chunk, and late as well."""
    vendor, doc_id = new_vendor(engine), uid("INV-")
    settle(engine, [disputed_doc(vendor, ["2.00"], 2, doc_id)])
    late = settle(engine, [disputed_doc(vendor, ["1.00"], 1, doc_id)] * 2)
    assert_late(http, late, ["1", "1"])
    [row] = identity_rows(engine, partition_key=vendor, document_id=doc_id)
    assert row.contract_version == 2


@pytest.mark.both_backends
def test_the_same_version_again_is_a_plain_duplicate(engine: Engine, http: TestClient) -> None:
    """Not older, only the same: the usual duplicate, with no reason."""
    vendor, doc_id = new_vendor(engine), uid("INV-")
    settle(engine, [disputed_doc(vendor, ["2.00"], 2, doc_id)])
    again = settle(engine, [disputed_doc(vendor, ["2.00"], 2, doc_id)])
    items = read(http, f"/v1/jobs/{again}/lines")["items"]
    assert [(i["outcome"], i["reason"]) for i in items] == [("duplicate", None)]


# -------------------------------------------------------------- freight


def freight_carrier(engine: Engine) -> str:
    """A carrier paying 2.00 a mile under version 1, 2.50 under version 2."""
    carrier = uid("CARRIER-")
    for version, rate in ((1, "2.00"), (2, "2.50")):
        body = {"rate_per_mile": rate, "fuel_surcharge": "0", "accessorials": {}, "tolerance": "1"}
        put_contract(engine, "freight_audit", carrier, version, body)
    return carrier


def freight_invoice(carrier: str, doc_id: str, version: int) -> dict[str, Any]:
    """Two 100-mile legs billed 200.00: posted under version 1, disputed under 2."""
    legs = [
        {"leg_no": n, "miles": "100", "accessorials": [], "billed_amount": "200.00"} for n in (1, 2)
    ]
    return {
        "document_id": doc_id,
        "partition_key": carrier,
        "contract_version": version,
        "document_type": "PDF",
        "legs": legs,
    }


def settle_job(ctx: WorkerContext, docs: list[dict[str, Any]], kind: str) -> str:
    """These documents through the settle stage, as one job; its id."""
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, kind)
    for message in messages:
        assert settle_chunk(ctx, message, 1) is not None
    return job_id


@pytest.mark.both_backends
@pytest.mark.regression
def test_a_late_lower_version_of_a_freight_invoice_changes_nothing(
    ctx: WorkerContext, http: TestClient
) -> None:
    carrier, doc_id = freight_carrier(ctx.engine), uid("PRO-")
    newer = settle_job(ctx, [freight_invoice(carrier, doc_id, 2)], "freight_audit")
    rows = identity_rows(ctx.engine, partition_key=carrier, document_id=doc_id)
    assert [(r.outcome, r.amount) for r in rows] == [("disputed", Decimal("250.00"))] * 2
    before = events(ctx.engine)

    late = settle_job(ctx, [freight_invoice(carrier, doc_id, 1)], "freight_audit")

    assert_late(http, late, ["1", "2"])
    assert identity_rows(ctx.engine, partition_key=carrier, document_id=doc_id) == rows
    assert all(r.job_id == newer for r in rows)
    assert events(ctx.engine) == before
    assert set(disputes.statuses(ctx.engine, [r.id for r in rows]).values()) == {"open"}


# --------------------------------------------------------------- recipe


def recipe_request(recipe: str, at: str, price: str, locations: list[str]) -> dict[str, Any]:
    return {
        "document_id": uid("RQ-"),
        "partition_key": recipe,
        "contract_version": 1,
        "recipe_id": recipe,
        "location_ids": locations,
        "effective_at": at,
        "pricing_snapshot": {"FLOUR": price},
        "trigger": "vendor_rate",
    }


@pytest.mark.both_backends
@pytest.mark.regression
def test_an_earlier_effective_recipe_cost_after_a_later_one_changes_nothing(
    ctx: WorkerContext, http: TestClient
) -> None:
    """Per (recipe, location): STORE-1 has a cost effective in March, so a
    February request is late there; STORE-3 has none, so it posts there. A
    request effective in April then chains from March."""
    recipe = uid("RECIPE-")
    put_contract(ctx.engine, "recipe_cost", recipe, 1, {"bom": {"FLOUR": "2"}})
    march = recipe_request(recipe, "2026-03-01T00:00:00Z", "3.00", ["STORE-1", "STORE-2"])
    settle_job(ctx, [march], "recipe_cost")
    before = events(ctx.engine)

    february = recipe_request(recipe, "2026-02-01T00:00:00Z", "2.50", ["STORE-1", "STORE-3"])
    job_id = settle_job(ctx, [february], "recipe_cost")

    job = read(http, f"/v1/jobs/{job_id}")
    assert job["outcomes"] == {"posted": 1, "disputed": 0, "duplicate": 1, "dead_lettered": 0}
    assert job["lines"] == sum(job["outcomes"].values())
    items = read(http, f"/v1/jobs/{job_id}/lines")["items"]
    assert [(i["line_ref"], i["outcome"], i["reason"]) for i in items] == [
        ("STORE-1", "duplicate", LATE),
        ("STORE-3", "posted", None),
    ]
    assert events(ctx.engine) == before + 1  # STORE-3's row only
    where = {"kind": "recipe_cost", "partition_key": recipe, "line_ref": "STORE-1"}
    store_1 = identity_rows(ctx.engine, **where)
    assert [r.amount for r in store_1] == [Decimal("6.0000")]

    april = recipe_request(recipe, "2026-04-01T00:00:00Z", "4.00", ["STORE-1"])
    settle_job(ctx, [april], "recipe_cost")
    store_1 = identity_rows(ctx.engine, **where)
    assert [(r.amount, r.delta) for r in store_1] == [
        (Decimal("6.0000"), Decimal("6.0000")),
        (Decimal("8.0000"), Decimal("2.0000")),
    ]
    assert store_1[1].supersedes_id == store_1[0].id


@pytest.mark.both_backends
def test_a_recipe_request_effective_at_the_same_instant_still_chains(
    ctx: WorkerContext, http: TestClient
) -> None:
    """Not earlier, only as early (new prices for the same instant): it posts
    and supersedes, as before."""
    recipe = uid("RECIPE-")
    put_contract(ctx.engine, "recipe_cost", recipe, 1, {"bom": {"FLOUR": "2"}})
    at = "2026-03-01T00:00:00Z"
    settle_job(ctx, [recipe_request(recipe, at, "3.00", ["STORE-1"])], "recipe_cost")
    settle_job(ctx, [recipe_request(recipe, at, "3.50", ["STORE-1"])], "recipe_cost")
    rows = identity_rows(ctx.engine, kind="recipe_cost", partition_key=recipe, line_ref="STORE-1")
    assert [(r.amount, r.delta) for r in rows] == [
        (Decimal("6.0000"), Decimal("6.0000")),
        (Decimal("7.0000"), Decimal("1.0000")),
    ]


# ----------------------------------------------------------------- race


def _outcome_of_v1(engine: Engine, vendor: str, doc_id: str, v1_job: str) -> str:
    """Check what counts once v1 and v2 of a one-line document both committed,
    and say how v1 ended: ``chained`` (it committed first, and v2 supersedes
    it) or ``late`` (a duplicate, ``newer_version_settled``)."""
    rows = identity_rows(engine, partition_key=vendor, document_id=doc_id)
    v2_rows = [r for r in rows if r.contract_version == 2]
    v1_rows = [r for r in rows if r.contract_version == 1]
    assert len(v2_rows) == 1, rows
    [v2] = v2_rows
    assert rows[-1] == v2, "a v1 row came after v2's"
    assert all(r.supersedes_id != v2.id for r in v1_rows)
    every = list_lines(engine, v1_job, outcome=None, after=None, limit=10)
    lines = [line for line in every if line.contract_version == 1]
    if v1_rows:
        [v1] = v1_rows
        assert (v2.supersedes_id, v2.delta) == (v1.id, v2.amount - v1.amount)
        assert [(line.outcome, line.reason) for line in lines] == [(v1.outcome, None)]
        return "chained"
    assert (v2.supersedes_id, v2.delta) == (None, v2.amount)
    assert [(line.outcome, line.reason) for line in lines] == [("duplicate", LATE)]
    return "late"


@pytest.mark.regression
@pytest.mark.parametrize("first", [1, 2])
def test_v1_and_v2_committing_in_either_order_leave_v2_counting(engine: Engine, first: int) -> None:
    """The second waits for the first's lineage lock, then reads its row: v2
    after v1 supersedes it; v1 after v2 is late. v2 is disputed, and its
    dispute stays open whichever came first."""
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite runs one writer at a time")
    vendor, doc_id = new_vendor(engine), uid("INV-")
    units = {v: planned(engine, [disputed_doc(vendor, ["1.50"], v, doc_id)]) for v in (1, 2)}
    second = 3 - first
    done: list[Any] = []

    def commit(version: int) -> None:
        ref, plan = units[version]
        with engine.begin() as conn:
            done.append(commit_plan(conn, ref, plan, 1))

    with engine.begin() as conn:
        ref, plan = units[first]
        assert commit_plan(conn, ref, plan, 1) is not None  # holds the lock until commit
        waiting = threading.Thread(target=commit, args=(second,))
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive(), "the second version did not wait for the first"
    waiting.join(timeout=30)
    assert not waiting.is_alive() and done[0] is not None
    v1_job = units[1][0].job_id
    ended = _outcome_of_v1(engine, vendor, doc_id, v1_job)
    assert ended == ("chained" if first == 1 else "late")
    [v2] = [r for r in identity_rows(engine, document_id=doc_id) if r.contract_version == 2]
    assert disputes.statuses(engine, [v2.id]) == {v2.id: "open"}


@pytest.mark.regression
@pytest.mark.parametrize("started_first", [1, 2])
def test_v1_and_v2_of_one_document_in_two_chunks_racing_leave_one_v2_that_counts(
    ctx: WorkerContext, started_first: int
) -> None:
    """Two chunks of one batch, v1 and v2 of one document, settled at once on
    two threads and connections, over and over: whatever the order, one v2 row
    counts, no v1 row supersedes it, and v1 either posted and was superseded or
    is late."""
    if ctx.engine.dialect.name != "postgresql":
        pytest.skip("SQLite runs one writer at a time")
    settings = ctx.settings.model_copy(update={"max_chunk_documents": 1})
    for _ in range(12):
        vendor, doc_id = new_vendor(ctx.engine), uid("INV-")
        docs = [disputed_doc(vendor, ["1.50"], v, doc_id) for v in (1, 2)]
        job_id, messages = store_job(ctx.engine, settings, ctx.internal_key, docs)
        assert len(messages) == 2
        ordered = messages if started_first == 1 else messages[::-1]
        results = race([lambda m=m: settle_chunk(ctx, m, 1) for m in ordered])
        assert not [r for r in results if isinstance(r, BaseException)], results
        _outcome_of_v1(ctx.engine, vendor, doc_id, job_id)
        job = job_status(ctx.engine, job_id)
        assert job is not None and job.state == "completed"
        assert job.lines == sum(job.outcomes.values()) == 2
