"""``POST /v1/batches?preview=true`` (docs/api.md#previewing-a-batch) against
the real services, in process, on the PostgreSQL and the SQLite ledger.

A preview answers each line's outcome as settlement would leave it, writes
nothing (no row in any table, no Redis key), refuses what a submission refuses
with the same codes, and is exact: the same batch submitted for real and
settled by the worker's own stage moves the previewed money, to the cent.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text
from typer.testing import CliRunner

from services.api.app import create_app
from services.commands.cli import app
from services.commands.client import Client
from services.commands.errors import explain
from services.commands.intake import batches as submit_command
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.jobs import intake as jobs_db
from shared.domain.pipeline.messages import ChunkMessage
from shared.domain.synthetic import GENERATORS, freight_contract, promo_contract
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_SECRET,
    ServiceEnv,
)
from tests.support.ledger import ledger_rows
from tests.support.x12_files import PROMO_CONTRACT, Freight, Promo, freight_file, promo_file
from tests.unit.conftest import restore_logging  # noqa: F401 - the CLI tests' fixture

pytestmark = pytest.mark.both_backends

PREVIEW = {"preview": "true"}


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    # Chunks of two documents: a batch spans several, as a large one would.
    settings = backend_env.settings(max_body_bytes=4 << 20, max_chunk_documents=2)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def api(http: TestClient) -> Client:
    return Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)


def batch(*docs: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "promo_accrual", "documents": list(docs)}).encode()


def vendor(ctx: WorkerContext) -> str:
    name = uid("V-")
    put_contract(ctx.engine, "promo_accrual", name, 1, promo_contract())
    return name


def submit_and_settle(
    ctx: WorkerContext, api: Client, body: bytes, kind: str = "promo_accrual"
) -> str:
    """Submit for real, then settle every chunk as a worker would, in this thread."""
    response = api.submit(body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["job_id"]
    for chunk_id, sha in jobs_db.stored_chunks(ctx.engine, job_id):
        message = ChunkMessage(chunk_id, job_id, kind, sha).signed(ctx.internal_key)
        assert settle_chunk(ctx, message, 1) is not None
    assert api.job(job_id)["state"] == "completed"
    return job_id


def preview(api: Client, body: bytes, **headers: Any) -> dict[str, Any]:
    response = api.submit(body, query=PREVIEW, **headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def by_line(answer: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in answer["lines"]:
        out.setdefault((line["document_id"], line["line_ref"]), []).append(line)
    return out


def test_a_preview_answers_each_outcome_and_reason(ctx: WorkerContext, api: Client) -> None:
    v = vendor(ctx)
    settled = promo_doc(v, [promo_line(1, "8", "1.00")])
    submit_and_settle(ctx, api, batch(settled))
    repeated = promo_doc(v, [promo_line(1, "16", "2.00")])
    fresh = promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, "4", "9.00")])
    unknown = promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, "1", "1.00")], version=9)
    answer = preview(api, batch(fresh, settled, repeated, repeated, unknown))

    assert answer["preview"] is True and answer["kind"] == "promo_accrual"
    lines = by_line(answer)
    [posted] = lines[(fresh["document_id"], "1")]
    assert (posted["outcome"], posted["amount"], posted["delta"]) == ("posted", "1.00", "1.00")
    [disputed] = lines[(fresh["document_id"], "2")]
    assert (disputed["outcome"], disputed["amount"], disputed["claimed_amount"]) == (
        "disputed",
        "0.50",
        "9.00",
    )
    [again] = lines[(settled["document_id"], "1")]
    assert (again["outcome"], again["reason"], again["delta"]) == (
        "duplicate",
        "already_settled",
        None,
    )
    first, second = lines[(repeated["document_id"], "1")]
    assert (first["outcome"], first["delta"]) == ("posted", "2.00")
    assert (second["outcome"], second["reason"]) == ("duplicate", "repeated_in_batch")
    dead = lines[(unknown["document_id"], "1")] + lines[(unknown["document_id"], "2")]
    assert {(d["outcome"], d["reason"]) for d in dead} == {
        ("dead_lettered", "unknown_contract_version")
    }
    # In batch order: by document as sent, then by line.
    assert [(x["document_id"], x["line_ref"]) for x in answer["lines"]] == [
        (d["document_id"], str(n["line_no"]))
        for d in (fresh, settled, repeated, repeated, unknown)
        for n in d["lines"]
    ]
    positions = [x["position"] for x in answer["lines"]]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)

    totals = answer["totals"]
    assert (totals["lines"], totals["posted"], totals["disputed"]) == (7, 2, 1)
    assert (totals["duplicate"], totals["dead_lettered"]) == (2, 2)
    assert (totals["amount_posted"], totals["amount_disputed"]) == ("3.00", "9.00")
    assert (totals["delta_posted"], totals["delta_disputed"], totals["delta"]) == (
        "3.00",
        "0.50",
        "3.50",
    )
    assert answer["partitions"] == {v: totals}
    assert answer["digest"].startswith("sha256:")


def test_the_same_preview_gives_the_same_bytes_and_one_log_event(
    ctx: WorkerContext, api: Client, caplog: pytest.LogCaptureFixture
) -> None:
    v = vendor(ctx)
    body = batch(promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, "4", "3.00")]))
    with caplog.at_level(logging.INFO, logger="settleq.api"):
        first = api.submit(body, query=PREVIEW)
        second = api.submit(body, query=PREVIEW)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    events = [r.__dict__ for r in caplog.records if getattr(r, "stage", None) == "preview"]
    assert len(events) == 2
    assert {
        k: events[0][k] for k in ("job_id", "partition_key", "lines", "outcomes", "digest")
    } == {
        "job_id": None,
        "partition_key": v,
        "lines": 2,
        "outcomes": {"posted": 1, "disputed": 1, "duplicate": 0, "dead_lettered": 0},
        "digest": first.json()["digest"],
    }


def test_an_ndjson_body_previews_as_its_json(ctx: WorkerContext, api: Client) -> None:
    v = vendor(ctx)
    docs = [
        promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, str(n), "3.00")]) for n in range(5)
    ]
    ndjson = "\n".join(json.dumps(x) for x in [{"kind": "promo_accrual"}, *docs]).encode()
    as_ndjson = api.submit(ndjson, "application/x-ndjson", query=PREVIEW)
    assert as_ndjson.status_code == 200, as_ndjson.text
    assert as_ndjson.json() == preview(api, batch(*docs))


def _row_counts(ctx: WorkerContext) -> dict[str, int]:
    with ctx.engine.connect() as conn:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in tables.metadata.sorted_tables
        }


def _redis_keys(client: redis.Redis, prefix: str) -> set[bytes]:
    return set(client.scan_iter(match=f"{prefix}:*", count=1000))


def test_a_preview_writes_nothing(
    ctx: WorkerContext, api: Client, backend_env: ServiceEnv, redis_client: redis.Redis
) -> None:
    v = vendor(ctx)
    settled = promo_doc(v, [promo_line(1, "8", "1.00")])
    submit_and_settle(ctx, api, batch(settled))
    body = batch(
        settled,
        promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, "4", "9.00")]),
        promo_doc(v, [promo_line(1, "8", "1.00")], version=7),
    )
    rows = _row_counts(ctx)
    keys = _redis_keys(redis_client, backend_env.queue_prefix)
    answer = preview(api, body, idempotency_key=uid("idem-"))
    assert answer["totals"]["lines"] == 4
    assert _row_counts(ctx) == rows
    # No key appeared (the earlier settlement's done-marks may expire meanwhile).
    assert _redis_keys(redis_client, backend_env.queue_prefix) <= keys
    # Nor was its idempotency key taken: the same body is then a new submission.
    assert api.submit(body).status_code == 202


def test_a_submission_moves_exactly_the_previewed_money(ctx: WorkerContext, api: Client) -> None:
    v = vendor(ctx)
    put_contract(
        ctx.engine,
        "promo_accrual",
        v,
        2,
        {"tier_rates": {"T1": "0.13", "T2": "0.47", "T3": "1.15"}, "tolerance": "0.05"},
    )
    earlier = promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, "3", "0.38")])
    submit_and_settle(ctx, api, batch(earlier))
    repriced = {**earlier, "contract_version": 2}  # each line moves by its new price
    docs = [
        repriced,
        earlier,  # a duplicate: v1 is in the ledger already
        promo_doc(v, [promo_line(1, "7", "0.88"), promo_line(2, "5", "4.00", tier="T2")]),
        promo_doc(v, [promo_line(1, "3", "0.33", tier="T3")], version=5),
        promo_doc(v, [promo_line(n, str(n), str(n * Decimal("0.125"))) for n in range(1, 9)]),
    ]
    body = batch(*docs)
    answer = preview(api, body)

    job_id = submit_and_settle(ctx, api, body)
    moved = {"posted": Decimal(0), "disputed": Decimal(0)}
    rows = {}
    for row in ledger_rows(ctx.engine, job_id):
        moved[row.outcome] += row.delta
        rows[(row.document_id, row.line_ref)] = row
    total = answer["totals"]
    assert moved["posted"] == Decimal(total["delta_posted"])
    assert moved["disputed"] == Decimal(total["delta_disputed"])
    job = api.job(job_id)
    outcomes = ("posted", "disputed", "duplicate", "dead_lettered")
    assert {o: job["outcomes"][o] for o in outcomes} == {o: total[o] for o in outcomes}
    lines = api.get(f"/v1/jobs/{job_id}/lines?limit=1000").json()["items"]
    assert [(x["document_id"], x["line_ref"], x["outcome"], x["reason"]) for x in lines] == [
        (x["document_id"], x["line_ref"], x["outcome"], _job_reason(x)) for x in answer["lines"]
    ]
    for line in answer["lines"]:
        if line["delta"] is not None:
            row = rows[(line["document_id"], line["line_ref"])]
            assert (row.amount, row.delta) == (Decimal(line["amount"]), Decimal(line["delta"]))
    # The ledger has moved: the same preview now finds every line settled.
    again = preview(api, body)
    assert Decimal(again["totals"]["delta"]) == 0
    assert again["totals"]["duplicate"] + again["totals"]["dead_lettered"] == total["lines"]


# A second contract version of each kind, priced apart from the first.
REPRICED = {
    "promo_accrual": {
        "tier_rates": {"T1": "0.13", "T2": "0.47", "T3": "1.15"},
        "tolerance": "0.05",
    },
    "recipe_cost": {"bom": {"FLOUR": "0.30", "TOMATO": "0.175", "MOZZ": "0.125", "BASIL": "0.005"}},
    "freight_audit": {
        **freight_contract(),
        "rates": {**freight_contract()["rates"], "mile": "2.20"},
    },
}


def _own_partitions(documents: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """The generator's documents under partitions of this test alone (a recipe's
    id is its partition)."""
    out = []
    for d in documents:
        key = f"{tag}-{d['partition_key']}"
        out.append({**d, "partition_key": key, **({"recipe_id": key} if "recipe_id" in d else {})})
    return out


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_every_kind_moves_exactly_the_previewed_money(
    ctx: WorkerContext, api: Client, kind: str
) -> None:
    """Settled once, then sent again mixed: some documents at a new contract
    version (re-priced), some as they were (duplicates), some new, some under a
    version no one published (dead-lettered), over several chunks."""
    make_batch, make_contract = GENERATORS[kind]
    tag = uid("P")
    first = _own_partitions(make_batch(24, seed=11)["documents"], tag)
    for key in sorted({d["partition_key"] for d in first}):
        put_contract(ctx.engine, kind, key, 1, make_contract())
        put_contract(ctx.engine, kind, key, 2, REPRICED[kind])
    submit_and_settle(ctx, api, json.dumps({"kind": kind, "documents": first}).encode(), kind)
    fresh = _own_partitions(make_batch(12, seed=12)["documents"], tag)
    docs = [
        *({**d, "contract_version": 2} for d in first[::2]),
        *first[1::3],
        *fresh,
        {**first[-1], "contract_version": 9},
    ]
    body = json.dumps({"kind": kind, "documents": docs}).encode()
    answer = preview(api, body)
    total = answer["totals"]
    assert total["posted"] and total["duplicate"] and total["dead_lettered"]

    job_id = submit_and_settle(ctx, api, body, kind)
    rows = ledger_rows(ctx.engine, job_id)
    for outcome in ("posted", "disputed"):
        moved = sum((r.delta for r in rows if r.outcome == outcome), Decimal(0))
        assert moved == Decimal(total[f"delta_{outcome}"]), outcome
    lines = api.get(f"/v1/jobs/{job_id}/lines?limit=1000").json()["items"]
    assert [(x["document_id"], x["line_ref"], x["outcome"], x["reason"]) for x in lines] == [
        (x["document_id"], x["line_ref"], x["outcome"], _job_reason(x)) for x in answer["lines"]
    ]
    by_ref = {(r.document_id, r.line_ref): r for r in rows}
    written = [x for x in answer["lines"] if x["delta"] is not None]
    assert len(written) == len(rows)
    for line in written:
        row = by_ref[(line["document_id"], line["line_ref"])]
        assert (row.amount, row.delta) == (Decimal(line["amount"]), Decimal(line["delta"]))


def _job_reason(line: dict[str, Any]) -> str | None:
    """A duplicate's reason as the job's lines give it: a preview also names
    which identity it met (the ledger's, or an earlier line's of the batch)."""
    if line["reason"] in ("already_settled", "repeated_in_batch"):
        return None
    reason: str | None = line["reason"]
    return reason


REFUSED = [
    pytest.param(
        b'{"kind": "promo_accrual", "documents": [{"document_id": "D", "partition_key": "V",'
        b' "contract_version": 1, "period": "P", "lines": [{"line_no": 1, "sku": "S",'
        b' "promo_tier": "T1", "qualifying_units": 8, "claimed_amount": "1.00"}]}]}',
        id="money-as-number",
    ),
    pytest.param(b'{"kind": "promo_accrual", "documents": []}', id="empty"),
    pytest.param(b'{"kind": "nope", "documents": []}', id="unknown-kind"),
    pytest.param(
        batch(promo_doc("V-1", [promo_line(1, "8", "1.00"), promo_line(1, "8", "1.00")])),
        id="duplicate-line",
    ),
    pytest.param(batch({**promo_doc("V-1", [promo_line(1, "8", "1.00")]), "x": 1}), id="extra"),
    pytest.param(b"{not json", id="not-json"),
]


@pytest.mark.parametrize("body", REFUSED)
def test_a_refused_body_gets_a_submissions_code(api: Client, body: bytes) -> None:
    real = api.submit(body)
    previewed = api.submit(body, query=PREVIEW)
    assert 400 <= real.status_code < 500
    assert (previewed.status_code, previewed.json()) == (real.status_code, real.json())


def test_refusals_of_the_caller_are_a_submissions(http: TestClient, api: Client) -> None:
    body = batch(promo_doc("VENDOR-9999", [promo_line(1, "8", "1.00")]))
    scoped = Client("http://testserver", SCOPED_ID, SCOPED_SECRET, http=http)
    for query in (None, PREVIEW):
        response = scoped.submit(body, query=query)
        assert (response.status_code, response.json()["error"]["code"]) == (
            403,
            "partition_not_allowed",
        )
    wrong = Client("http://testserver", PRODUCER_ID, "not-the-secret", http=http)
    response = wrong.submit(body, query=PREVIEW)
    assert (response.status_code, response.json()["error"]["code"]) == (401, "signature_invalid")
    unsigned = http.post("/v1/batches?preview=true", content=body)
    assert unsigned.status_code == 401
    media = api.submit(body, content_type="text/csv", query=PREVIEW)
    assert (media.status_code, media.json()["error"]["code"]) == (415, "unsupported_media_type")


def test_full_queues_hold_back_a_submission_not_a_preview(
    ctx: WorkerContext, api: Client, backend_env: ServiceEnv
) -> None:
    """A preview queues nothing: backpressure is about what the queues hold."""
    v = vendor(ctx)
    assert api.submit(batch(promo_doc(v, [promo_line(1, "8", "1.00")]))).status_code == 202
    body = batch(promo_doc(v, [promo_line(1, "4", "0.50")]))
    with TestClient(create_app(backend_env.settings(max_queue_depth=0))) as full:
        client = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=full)
        refused = client.submit(body)
        assert (refused.status_code, refused.json()["error"]["code"]) == (429, "backpressure")
        assert preview(client, body)["totals"]["posted"] == 1


def test_a_reused_idempotency_key_is_refused_as_a_submission(
    ctx: WorkerContext, api: Client
) -> None:
    v = vendor(ctx)
    key = uid("idem-")
    first = api.submit(batch(promo_doc(v, [promo_line(1, "8", "1.00")])), idempotency_key=key)
    assert first.status_code == 202
    other = batch(promo_doc(v, [promo_line(1, "4", "0.50")]))
    response = api.submit(other, idempotency_key=key, query=PREVIEW)
    assert (response.status_code, response.json()["error"]["code"]) == (
        409,
        "idempotency_key_reused",
    )


def _control_number(ctx: WorkerContext) -> int | None:
    """Where the 997s' control number sequence stands (PostgreSQL's)."""
    if ctx.engine.dialect.name != "postgresql":
        return None
    with ctx.engine.connect() as conn:
        return int(conn.execute(text("SELECT last_value FROM edi_control_number")).scalar_one())


def test_an_x12_file_previews_each_set_with_the_997_that_would_accept_it(
    ctx: WorkerContext, api: Client
) -> None:
    """Its sets settle as the same invoices sent as JSON would: the preview,
    then the file submitted and settled, move the same money; the preview
    stores nothing and takes no control number."""
    v = uid("V-")
    put_contract(ctx.engine, "promo_accrual", v, 1, PROMO_CONTRACT)
    posted, disputed = Promo(uid("P"), v), Promo(uid("P"), v, claimed="12.00")
    body = promo_file(posted, disputed)
    rows, number = _row_counts(ctx), _control_number(ctx)
    query = {**PREVIEW, "contract_version": 1}
    response = api.submit(body, "application/edi-x12", query=query)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (_row_counts(ctx), _control_number(ctx)) == (rows, number)
    sets = {d["document_id"]: d for d in answer["documents"]}
    assert (sets[posted.invoice]["posted"], sets[disputed.invoice]["disputed"]) == (1, 1)
    assert sets[posted.invoice]["amount_posted"] == "10.00"
    ack = answer["acknowledgement"]
    assert ack.startswith("ISA") and "AK9*A*2*2*2" in ack

    job = api.submit(body, "application/edi-x12", query={"contract_version": 1})
    assert job.status_code == 202, job.text
    job_id = job.json()["job_id"]
    for chunk_id, sha in jobs_db.stored_chunks(ctx.engine, job_id):
        message = ChunkMessage(chunk_id, job_id, "promo_accrual", sha).signed(ctx.internal_key)
        assert settle_chunk(ctx, message, 1) is not None
    moved = {(r.document_id, r.outcome): r.delta for r in ledger_rows(ctx.engine, job_id)}
    assert moved == {
        (line["document_id"], line["outcome"]): Decimal(line["delta"]) for line in answer["lines"]
    }
    # The file again: a repeat previews what its lines are now, duplicates.
    again = api.submit(body, "application/edi-x12", query=query).json()
    assert again["totals"]["duplicate"] == 2


def test_a_refused_x12_file_is_the_submissions_422_and_keeps_nothing(
    ctx: WorkerContext, api: Client
) -> None:
    carrier = uid("C").upper()
    body = freight_file(Freight(uid("F"), carrier))
    broken = body.replace(b"SE*9*0001", b"SE*8*0001")
    rows, number = _row_counts(ctx), _control_number(ctx)
    query = {**PREVIEW, "contract_version": 1}
    response = api.submit(broken, "application/edi-x12", query=query)
    assert (response.status_code, response.json()["error"]["code"]) == (422, "edi_count_mismatch")
    ack = response.json()["error"]["acknowledgement"]
    assert ack.startswith("ISA") and "AK5*R" in ack
    # Not in its sender's health, no control number taken.
    assert (_row_counts(ctx), _control_number(ctx)) == (rows, number)
    real = api.submit(broken, "application/edi-x12", query={"contract_version": 1})
    assert real.json()["error"]["code"] == response.json()["error"]["code"]


def test_a_bad_flag_is_refused(api: Client) -> None:
    body = batch(promo_doc("V-1", [promo_line(1, "8", "1.00")]))
    flag = api.submit(body, query={"preview": "yes"})
    assert (flag.status_code, flag.json()["error"]["code"]) == (422, "preview_invalid")


def test_more_than_ten_thousand_lines_are_refused(ctx: WorkerContext, api: Client) -> None:
    v = vendor(ctx)
    docs = [promo_doc(v, [promo_line(n, "8", "1.00") for n in range(1, 11)]) for _ in range(1000)]
    docs.append(promo_doc(v, [promo_line(1, "8", "1.00")]))
    rows = _row_counts(ctx)
    response = api.submit(batch(*docs), query=PREVIEW)
    assert (response.status_code, response.json()["error"]["code"]) == (413, "preview_too_large")
    assert "10,000" in response.json()["error"]["message"]
    assert _row_counts(ctx) == rows


# --- settleq submit --preview --------------------------------------------------------


@pytest.mark.usefixtures("restore_logging")
def test_settleq_submit_preview_prints_outcomes_money_and_reasons(
    ctx: WorkerContext, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_command, "make_client", lambda *args: api)
    v, w = vendor(ctx), vendor(ctx)
    settled = promo_doc(v, [promo_line(1, "8", "1.00")])
    submit_and_settle(ctx, api, batch(settled))
    file = tmp_path / "batch.json"
    file.write_bytes(
        batch(
            settled,
            promo_doc(v, [promo_line(1, "8", "1.00"), promo_line(2, "4", "9.00")]),
            promo_doc(w, [promo_line(1, "80", "10.00"), promo_line(2, "1", "1.00")], version=3),
            promo_doc(w, [promo_line(1, "8000", "1000.00")]),
        )
    )
    rows = _row_counts(ctx)
    shown = CliRunner().invoke(app, ["submit", str(file), "--preview"])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "preview of a promo_accrual batch: 6 lines; nothing was submitted" in out
    # Per partition: posted, disputed, duplicate, dead-lettered, then the money.
    assert re.search(rf"{v}\W+1\W+1\W+1\W+0\W+1\.00\W+9\.00\W+1\.50", out), out
    assert re.search(rf"{w}\W+1\W+0\W+0\W+2\W+1,000\.00\W+0\.00\W+1,000\.00", out), out
    assert re.search(r"total\W+2\W+1\W+1\W+2\W+1,001\.00\W+9\.00\W+1,001\.50", out), out
    assert re.search(r"dead-lettered: 2 line\(s\)\n\s+unknown_contract_version\s+2", out), out
    assert re.search(r"duplicate: 1 line\(s\)\n\s+already_settled\s+1", out), out
    assert "digest sha256:" in out
    assert _row_counts(ctx) == rows


@pytest.mark.usefixtures("restore_logging")
def test_settleq_submit_preview_prints_a_refusal_a_line_a_problem(
    api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_command, "make_client", lambda *args: api)
    file = tmp_path / "batch.json"
    file.write_bytes(b'{"kind": "promo_accrual", "documents": []}')
    previewed = CliRunner().invoke(app, ["submit", str(file), "--preview"])
    submitted = CliRunner().invoke(app, ["submit", str(file)])
    # What the command line prints of a refusal (errors.run: then exit 1).
    said = explain(previewed.exception) if previewed.exception else None
    assert (
        said == "422 too_short: documents: List should have at least 1 item after validation, not 0"
    )
    assert said == (explain(submitted.exception) if submitted.exception else None)
    waited = CliRunner().invoke(app, ["submit", str(file), "--preview", "--wait"])
    assert waited.exit_code == 2 and "no job to wait for" in waited.output


@pytest.mark.usefixtures("restore_logging")
def test_settleq_submit_preview_lists_each_unit_costs_change(
    ctx: WorkerContext, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipe's costs add up to nothing: a supplier's price change is shown
    line by line, each location's cost and its change, the largest first."""
    monkeypatch.setattr(submit_command, "make_client", lambda *args: api)
    recipe = uid("R-")
    put_contract(ctx.engine, "recipe_cost", recipe, 1, {"bom": {"FLOUR": "0.500"}})

    def request(at: str, flour: str, stores: list[str]) -> dict[str, Any]:
        return {
            "document_id": uid("RQ-"),
            "partition_key": recipe,
            "contract_version": 1,
            "recipe_id": recipe,
            "location_ids": stores,
            "effective_at": at,
            "pricing_snapshot": {"FLOUR": flour},
            "trigger": "vendor_rate",
        }

    before = [
        request("2026-01-01T00:00:00Z", "0.80", ["EAST-1"]),
        request("2026-01-01T00:00:00Z", "0.90", ["WEST-1"]),
    ]
    body = json.dumps({"kind": "recipe_cost", "documents": before}).encode()
    submit_and_settle(ctx, api, body, "recipe_cost")
    after = [
        request("2026-02-01T00:00:00Z", "0.92", ["EAST-1"]),
        request("2026-02-01T00:00:00Z", "1.10", ["WEST-1"]),
    ]
    file = tmp_path / "feb.json"
    file.write_text(json.dumps({"kind": "recipe_cost", "documents": after}))
    shown = CliRunner().invoke(app, ["submit", str(file), "--preview"])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    # WEST-1 moves 0.1000 (0.45 → 0.55), EAST-1 0.0600 (0.40 → 0.46): largest first.
    west = re.search(rf"{recipe}\W+\S+\W+WEST-1\W+0\.55\d*\W+0\.1\d*", out)
    east = re.search(rf"{recipe}\W+\S+\W+EAST-1\W+0\.46\d*\W+0\.06\d*", out)
    assert west and east and west.start() < east.start(), out
