"""``POST /v1/batches`` of X12 files (docs/api.md#edi-intake) against the real
services, in process, on the PostgreSQL and the SQLite ledger.

A file goes in through the app and settles through the worker's own stage
(its stored chunks, signed as the front door signs them): the ledger then
holds what the file bills. Every refusal leaves nothing behind: no job, no
chunk, no interchange, no message.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from typer.testing import CliRunner

from services.api import submission
from services.api.app import create_app
from services.api.edi.parallel import child as edi_child
from services.api.edi.parallel import parent as edi_parallel
from services.api.edi.parallel.layout import Layout
from services.commands.cli import app
from services.commands.client import Client
from services.commands.intake import batches
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.edi.tables import edi_acknowledgements, edi_interchanges
from shared.adapters.db.jobs import intake as jobs_db
from shared.domain.pipeline.messages import ChunkMessage
from shared.domain.signing import sign_request
from tests.support import edi_blocks
from tests.support.factories import uid
from tests.support.infra import (
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_PARTITIONS,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
    queue_depth,
)
from tests.support.x12_files import (
    PROMO_CONTRACT,
    Freight,
    Promo,
    freight_contract,
    freight_file,
    next_control_number,
    promo_file,
)
from tests.unit.conftest import restore_logging  # noqa: F401 - the CLI test's fixture

pytestmark = pytest.mark.both_backends

X12 = "application/edi-x12"
REAL = Path(__file__).resolve().parents[1] / "data" / "x12"


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings(max_body_bytes=64 * 1024))) as client:
        yield client


@pytest.fixture(scope="module")
def api(http: TestClient) -> Client:
    return Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)


def submit_x12(api: Client, body: bytes, version: int | None = 1, **query: Any) -> Any:
    return api.submit(body, X12, query={"contract_version": version, **query})


def error(response: Any) -> dict[str, Any]:
    body: dict[str, Any] = response.json()["error"]
    return body


def settle(ctx: WorkerContext, job_id: str, kind: str) -> None:
    """Settle every chunk of a job as a worker would, in this thread."""
    for chunk_id, sha in jobs_db.stored_chunks(ctx.engine, job_id):
        message = ChunkMessage(chunk_id, job_id, kind, sha).signed(ctx.internal_key)
        assert settle_chunk(ctx, message, 1) is not None


def ledger(ctx: WorkerContext, job_id: str) -> dict[str, tuple[str, Decimal, str | None]]:
    """document_id -> (outcome, amount, correlation_id) of a job's ledger rows."""
    e = tables.ledger_entries.c
    with ctx.engine.connect() as conn:
        rows = conn.execute(
            select(e.document_id, e.outcome, e.amount, e.correlation_id).where(e.job_id == job_id)
        ).all()
    return {r.document_id: (r.outcome, r.amount, r.correlation_id) for r in rows}


class Trace:
    """Counts what a submission may store, to prove a refusal stored none of it."""

    def __init__(self, ctx: WorkerContext, env: ServiceEnv) -> None:
        self.ctx, self.env = ctx, env
        self.before = self.snapshot()

    def snapshot(self) -> tuple[int, ...]:
        with self.ctx.engine.connect() as conn:
            counts = tuple(
                conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (tables.jobs, tables.chunks, edi_interchanges, edi_acknowledgements)
            )
        return (*counts, queue_depth(self.env.queue_prefix, "fast_path"))

    def unchanged(self) -> bool:
        return self.snapshot() == self.before


@pytest.fixture
def trace(ctx: WorkerContext, backend_env: ServiceEnv) -> Trace:
    return Trace(ctx, backend_env)


def carrier(ctx: WorkerContext) -> str:
    scac = uid("C").upper()
    put_contract(ctx.engine, "freight_audit", scac, 1, freight_contract())
    return scac


def vendor(ctx: WorkerContext) -> str:
    name = uid("V-")
    put_contract(ctx.engine, "promo_accrual", name, 1, PROMO_CONTRACT)
    return name


def isa13_of(ack: str) -> int:
    """The control number of a 997's (first) interchange: ISA13, by counting elements."""
    separator = ack[3]
    return int(ack.split(separator)[13])


# --- accepted files settle --------------------------------------------------------


def test_a_210_file_settles_each_invoice_to_its_contract(
    api: Client, ctx: WorkerContext, http: TestClient
) -> None:
    scac = carrier(ctx)
    fair = Freight(uid("F"), scac)  # 100 mi x 2.15 + 75.00 liftgate = 290.00, as billed
    over = Freight(uid("F"), scac, linehaul="250.00")  # billed 325.00 for 290.00
    isa13 = next_control_number()
    response = submit_x12(api, freight_file(fair, over, isa13=isa13))
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert (accepted["documents"], accepted["lines"], accepted["skipped"]) == (2, 2, [])
    job_id = accepted["job_id"]
    assert accepted["acknowledgement_url"] == f"/v1/jobs/{job_id}/acknowledgement"
    settle(ctx, job_id, "freight_audit")

    rows = ledger(ctx, job_id)
    assert rows[fair.invoice][:2] == ("posted", Decimal("290.00"))
    assert rows[over.invoice][:2] == ("disputed", Decimal("290.00"))
    assert rows[fair.invoice][2] == f"x12:CARRIERTEST:{isa13:09d}:1:0001"
    assert rows[over.invoice][2] == f"x12:CARRIERTEST:{isa13:09d}:1:0002"
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert (job["source_format"], job["state"], job["kind"]) == (
        "x12",
        "completed",
        "freight_audit",
    )
    amounts = {k: Decimal(v) for k, v in job["amounts"].items()}
    assert amounts == {
        "posted": Decimal("290.00"),
        "disputed": Decimal("325.00"),
        "disputed_model": Decimal("290.00"),
    }
    lines = api.get(f"/v1/jobs/{job_id}/lines").json()["items"]
    assert {line["correlation_id"] for line in lines} == {rows[d][2] for d in rows}
    csv_text = http.get(
        f"/v1/jobs/{job_id}/lines.csv", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}
    ).text
    header = csv_text.splitlines()[0].split(",")
    assert {"correlation_id", "partition_key", "miles", "rate_basis"} <= set(header)
    assert f"x12:CARRIERTEST:{isa13:09d}:1:0001" in csv_text


def test_a_210_file_mapped_by_a_child_process_settles_as_in_process(
    backend_env: ServiceEnv, ctx: WorkerContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SETTLEQ_X12_MAP_PROCESSES=2 with blocks of a few sets: a child process maps
    some (services/api/edi/parallel/parent.py); the job and its ledger are the file's,
    the over-billed invoices in the child's blocks disputed, and no child is left."""
    monkeypatch.setattr(edi_parallel, "default_layout", Layout(1, ours=2, theirs=3, min_cycles=1))
    taken: list[int] = []
    scac = carrier(ctx)
    invoices = [
        Freight(uid("F"), scac, linehaul="250.00" if n % 7 == 3 else "215.00") for n in range(40)
    ]
    settings = backend_env.settings(x12_map_processes=2)
    with (
        edi_blocks.listening(lambda pid, block: taken.append(block)),
        TestClient(create_app(settings)) as http,
    ):
        api = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        response = submit_x12(api, freight_file(*invoices))
    assert response.status_code == 202, response.text
    assert taken, "no block came from a child"
    accepted = response.json()
    assert (accepted["documents"], accepted["lines"], accepted["skipped"]) == (40, 40, [])
    settle(ctx, accepted["job_id"], "freight_audit")
    rows = ledger(ctx, accepted["job_id"])
    for n, invoice in enumerate(invoices):
        outcome = "disputed" if n % 7 == 3 else "posted"
        assert rows[invoice.invoice][:2] == (outcome, Decimal("290.00")), n
        assert rows[invoice.invoice][2].endswith(f":1:{n + 1:04d}")
    # The mapping fork server stays for the next file; none of its children does.
    server = edi_child.SERVER.process
    assert server is not None
    children = [
        p for p in Path("/proc").iterdir() if p.name.isdigit() and _parent_of(p) == str(server.pid)
    ]
    assert not children


def _parent_of(process: Path) -> str | None:
    try:
        return (process / "stat").read_text().rsplit(")", 1)[1].split()[1]
    except OSError:
        return None


def test_an_810_file_settles_its_allowances(api: Client, ctx: WorkerContext) -> None:
    name = vendor(ctx)
    invoice = Promo(uid("P"), name)  # 80 units x 0.125 = 10.00, as claimed
    response = submit_x12(api, promo_file(invoice))
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    settle(ctx, job_id, "promo_accrual")
    assert ledger(ctx, job_id)[invoice.invoice][:2] == ("posted", Decimal("10.00"))
    assert api.get(f"/v1/jobs/{job_id}").json()["source_format"] == "x12"


def test_the_same_invoice_as_json_and_as_x12_posts_once(api: Client, ctx: WorkerContext) -> None:
    invoice = Promo(uid("P"), vendor(ctx))
    as_json = json.dumps({"kind": "promo_accrual", "documents": [invoice.as_json()]}).encode()
    first = api.submit(as_json)
    assert first.status_code == 202, first.text
    settle(ctx, first.json()["job_id"], "promo_accrual")
    second = submit_x12(api, promo_file(invoice))
    assert second.status_code == 202, second.text
    job_id = second.json()["job_id"]
    settle(ctx, job_id, "promo_accrual")
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert job["outcomes"] == {"posted": 0, "disputed": 0, "duplicate": 1, "dead_lettered": 0}
    assert ledger(ctx, job_id) == {}
    [line] = api.get(f"/v1/jobs/{job_id}/lines").json()["items"]
    assert line["outcome"] == "duplicate" and line["correlation_id"].startswith("x12:RETAILTEST:")


def test_the_real_mgctlyst_210_settles_to_the_cent_on_its_printed_terms(
    api: Client, ctx: WorkerContext
) -> None:
    """tests/data/x12/210-MGCTLYST-SAMPLE.EDI (README's example): 78.89 cwt at
    46.09, 83% off, fuel 0.72% of the gross, CUS 15.00: 659.31 against a bill of
    659.40, posted within 0.10. Sent again, it is the same job."""
    body = (REAL / "210-MGCTLYST-SAMPLE.EDI").read_bytes()
    # A version of this test's own: the carrier (SCAC) is the file's, shared by the run.
    version = int(next_control_number() % 1_000_000) + 1000
    terms = {
        "rates": {"cwt": "46.09"},
        "discount_pct": "0.83",
        "fuel_surcharge": "0.0072",
        "fuel_basis": "gross",
        "accessorials": {"CUS": "15.00"},
        "tolerance": "0.10",
    }
    put_contract(ctx.engine, "freight_audit", "SCAC", version, terms)
    response = submit_x12(api, body, version=version)
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    settle(ctx, job_id, "freight_audit")
    outcome, amount, correlation_id = ledger(ctx, job_id)["09851270"]
    assert (outcome, amount) == ("posted", Decimal("659.31"))
    assert correlation_id == "x12:SCAC:000001838:1838:18380001"
    again = submit_x12(api, body, version=version)
    assert again.status_code == 200 and again.json()["job_id"] == job_id
    ack = api.acknowledgement(job_id).text
    assert "AK1*IM*1838~" in ack and "AK2*210*18380001~" in ack and "AK9*A*1*1*1~" in ack


# --- duplicates -------------------------------------------------------------------


def test_the_same_bytes_again_are_the_same_job(api: Client, trace: Trace) -> None:
    body = freight_file(Freight(uid("F"), uid("C").upper()))
    first = submit_x12(api, body)
    assert first.status_code == 202, first.text
    after_first = trace.snapshot()
    again = submit_x12(api, body)
    keyed = api.submit(body, X12, uid("idem-"), {"contract_version": 1})
    assert (again.status_code, keyed.status_code) == (200, 200), keyed.text
    assert again.json() == keyed.json() == first.json()
    assert trace.snapshot() == after_first


@pytest.mark.regression
def test_a_reused_control_number_with_other_bytes_is_409_naming_the_job_that_holds_it(
    api: Client, trace: Trace
) -> None:
    scac, isa13 = uid("C").upper(), next_control_number()
    first = submit_x12(api, freight_file(Freight(uid("F"), scac), isa13=isa13))
    assert first.status_code == 202
    job_id = first.json()["job_id"]
    before = trace.snapshot()
    other = submit_x12(api, freight_file(Freight(uid("F"), scac), isa13=isa13))
    assert other.status_code == 409 and error(other)["code"] == "edi_duplicate_interchange"
    # Before (issue 29, G7): neither the details nor the message named the job.
    assert error(other)["details"] == [
        {
            "sender_qualifier": "ZZ",
            "sender_id": "CARRIERTEST",
            "control_number": f"{isa13:09d}",
            "job_id": job_id,
        }
    ]
    assert f"in job {job_id}" in error(other)["message"]
    assert trace.snapshot() == before


def test_the_same_control_number_from_a_sender_of_another_qualifier_is_another_interchange(
    api: Client,
) -> None:
    """X12 names a sender by ISA05 and ISA06 together: ZZ/CARRIERTEST and
    01/CARRIERTEST are two senders, whose control numbers never collide."""
    scac, isa13 = uid("C").upper(), next_control_number()
    assert submit_x12(api, freight_file(Freight(uid("F"), scac), isa13=isa13)).status_code == 202
    other = freight_file(Freight(uid("F"), scac), isa13=isa13).replace(b"*ZZ*", b"*01*", 1)
    assert b"*00*          *01*CARRIERTEST" in other  # ISA05 changed, nothing else
    assert submit_x12(api, other).status_code == 202


def test_the_same_file_under_another_contract_version_is_409(api: Client) -> None:
    body = freight_file(Freight(uid("F"), uid("C").upper()))
    assert submit_x12(api, body).status_code == 202
    other = submit_x12(api, body, version=2)
    assert other.status_code == 409 and error(other)["code"] == "edi_duplicate_interchange"


def test_two_processes_at_once_store_an_interchange_once(
    api: Client, trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both requests look before the other stored anything; the unique constraint
    decides: one job, and the other request answers as the first one's repeat or 409."""
    scac, isa13 = uid("C").upper(), next_control_number()
    bodies = [freight_file(Freight(uid("F"), scac), isa13=isa13) for _ in range(2)]
    looked = threading.Barrier(2)
    real = submission.accepted_before
    first_look: set[int] = set()

    def racing(*args: Any) -> Any:
        me = threading.get_ident()
        if me not in first_look:  # each request's first look: both see nothing yet
            first_look.add(me)
            looked.wait(timeout=10)
            return None
        return real(*args)

    monkeypatch.setattr(submission, "accepted_before", racing)
    answers: list[Any] = []

    def send(body: bytes) -> None:
        answers.append(submit_x12(api, body))

    threads = [threading.Thread(target=send, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [202, 409], [r.text for r in answers]
    refused = next(r for r in answers if r.status_code == 409)
    assert error(refused)["code"] == "edi_duplicate_interchange"
    jobs, chunks, interchanges, acks, _ = trace.snapshot()
    assert (jobs, interchanges, acks) == (
        trace.before[0] + 1,
        trace.before[2] + 1,
        trace.before[3] + 1,
    )


# --- refusals ---------------------------------------------------------------------


def test_a_refused_file_stores_nothing_and_carries_its_997(api: Client, trace: Trace) -> None:
    body = freight_file(Freight(uid("F"), uid("C").upper()))
    broken = body.replace(b"SE*9*0001", b"SE*8*0001")
    assert broken != body
    response = submit_x12(api, broken)
    assert response.status_code == 422, response.text
    refused = error(response)
    assert refused["code"] == "edi_count_mismatch"
    [problem] = refused["details"]
    assert (problem["tag"], problem["element"], problem["control_number"]) == ("SE", 1, "0001")
    ack = refused["acknowledgement"]
    assert ack.startswith("ISA") and "997" in ack and "AK5*R" in ack
    assert trace.unchanged()


def test_a_file_that_is_not_x12_has_no_997(api: Client, trace: Trace) -> None:
    response = submit_x12(api, b'{"kind": "promo_accrual", "documents": []}')
    assert response.status_code == 422
    assert error(response)["code"].startswith("edi_")
    assert error(response)["acknowledgement"] is None
    assert trace.unchanged()


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"contract_version": "0"}, "contract_version_invalid"),
        ({"contract_version": "v1"}, "contract_version_invalid"),
        ({"contract_version": "2147483648"}, "contract_version_invalid"),
        ({"contract_version": 1, "partition_key": "A|B"}, "partition_key_invalid"),
        ({"contract_version": 1, "period": "x" * 129}, "period_invalid"),
    ],
)
def test_a_bad_query_is_422_before_the_file_is_read(
    api: Client, trace: Trace, query: dict[str, Any], code: str
) -> None:
    response = api.submit(freight_file(Freight(uid("F"), "ABCD")), X12, query=query)
    assert response.status_code == 422 and error(response)["code"] == code, response.text
    assert trace.unchanged()


@pytest.mark.parametrize(
    "query",
    [
        {"contract_version": 1, "partition_key": "ABCD"},
        {"contract_version": 1, "period": "2026-Q3"},
        {"contract_version": 1, "partition_key": "OTHER", "period": "2026-Q3"},
    ],
)
def test_a_210_file_given_an_810_parameter_is_refused_not_settled_elsewhere(
    api: Client, trace: Trace, query: dict[str, Any]
) -> None:
    """A 210's partition is its B3-11 carrier: a partition_key or period given for
    it would be ignored, so it is refused, and nothing is stored."""
    response = api.submit(freight_file(Freight(uid("F"), "ABCD")), X12, query=query)
    assert response.status_code == 422, response.text
    refused = error(response)
    assert refused["code"] == "query_parameter_not_applicable"
    assert {d["loc"][1] for d in refused["details"]} == set(query) - {"contract_version"}
    assert trace.unchanged()


# --- the front door's rules, for X12 --------------------------------------------------


def test_signing_covers_the_bytes_and_the_query(api: Client, trace: Trace) -> None:
    body = freight_file(Freight(uid("F"), uid("C").upper()))
    path = "/v1/batches?contract_version=1"

    def send(signed_path: str, sent: bytes) -> Any:
        signature = sign_request(PRODUCER_SECRET, int(time.time()), "POST", signed_path, body)
        headers = {"Content-Type": X12, "X-Key-Id": PRODUCER_ID, "X-Signature": signature}
        assert api.http is not None
        return api.http.post(path, content=sent, headers=headers)

    # Signed without its query: the query (which changes what the file means) is signed.
    no_query = send("/v1/batches", body)
    assert (no_query.status_code, error(no_query)["code"]) == (401, "signature_invalid")
    tampered = send(path, body.replace(b"SHIPPER", b"SHIPPEX"))
    assert (tampered.status_code, error(tampered)["code"]) == (401, "signature_invalid")
    assert trace.unchanged()
    assert send(path, body).status_code == 202


def test_a_partition_outside_the_keys_scope_is_403(
    http: TestClient, ctx: WorkerContext, trace: Trace
) -> None:
    scoped = Client("http://testserver", SCOPED_ID, SCOPED_SECRET, http=http)
    theirs = submit_x12(scoped, promo_file(Promo(uid("P"), "VENDOR-9999")))
    assert (theirs.status_code, error(theirs)["code"]) == (403, "partition_not_allowed")
    assert trace.unchanged()
    # The query names the vendor of an 810: one of the key's own.
    mine = submit_x12(
        scoped, promo_file(Promo(uid("P"), "VENDOR-9999")), partition_key=SCOPED_PARTITIONS[0]
    )
    assert mine.status_code == 202, mine.text


def test_a_file_above_the_body_limit_is_413(api: Client, trace: Trace) -> None:
    scac = uid("C").upper()
    body = freight_file(*(Freight(uid("F"), scac) for _ in range(400)))
    assert len(body) > 64 * 1024
    response = submit_x12(api, body)
    assert (response.status_code, error(response)["code"]) == (413, "payload_too_large")
    assert trace.unchanged()


def test_a_file_that_cannot_be_spooled_is_503_and_stores_nothing(
    api: Client, trace: Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool's disk full or missing is the server's trouble: a 503 to retry,
    never a 500, and nothing stored (services/api/edi/spool/file.py)."""
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/settleq-spool")
    response = submit_x12(api, freight_file(Freight(uid("F"), uid("C").upper())))
    assert (response.status_code, error(response)["code"]) == (503, "spool_unavailable")
    assert trace.unchanged()


def test_full_queues_refuse_a_file_with_429(http: TestClient, api: Client, trace: Trace) -> None:
    depth = http.app.state.ctx.queue_depth  # type: ignore[attr-defined]

    class Full:
        def current(self) -> int:
            return 10**9

    http.app.state.ctx.queue_depth = Full()  # type: ignore[attr-defined]
    try:
        response = submit_x12(api, freight_file(Freight(uid("F"), uid("C").upper())))
    finally:
        http.app.state.ctx.queue_depth = depth  # type: ignore[attr-defined]
    assert (response.status_code, error(response)["code"]) == (429, "backpressure")
    assert int(response.headers["Retry-After"]) > 0
    assert trace.unchanged()


def test_the_content_type_is_read_in_any_case(api: Client) -> None:
    body = freight_file(Freight(uid("F"), uid("C").upper()))
    response = api.submit(body, "Application/EDI-X12; charset=utf-8", query={"contract_version": 1})
    assert response.status_code == 202, response.text


# --- the 997 ----------------------------------------------------------------------------


def test_the_acknowledgement_is_served_to_the_producer_and_to_viewers(
    api: Client, http: TestClient
) -> None:
    first = submit_x12(api, freight_file(Freight(uid("F"), uid("C").upper()))).json()
    second = submit_x12(api, promo_file(Promo(uid("P"), uid("V-")))).json()
    mine = api.acknowledgement(first["job_id"])
    assert mine.status_code == 200 and mine.headers["content-type"] == X12
    ack = mine.text
    assert ack.startswith("ISA") and "GS*FA*" in ack and re.search(r"AK5\*A", ack)
    # Addressed back to the sender: ISA08 is the carrier's id.
    assert ack.split(ack[3])[8].strip() == "CARRIERTEST"
    viewer = Client("http://testserver", token=VIEWER_TOKEN, http=http)
    assert viewer.acknowledgement(first["job_id"]).text == ack
    # Our control numbers increase from one 997 to the next.
    assert isa13_of(api.acknowledgement(second["job_id"]).text) > isa13_of(ack)


def test_a_json_job_has_no_acknowledgement_and_others_jobs_are_not_found(
    api: Client, http: TestClient
) -> None:
    x12 = submit_x12(api, freight_file(Freight(uid("F"), uid("C").upper()))).json()["job_id"]
    promo = Promo(uid("P"), uid("V-")).as_json()
    json_job = api.submit(json.dumps({"kind": "promo_accrual", "documents": [promo]}).encode())
    none = api.acknowledgement(json_job.json()["job_id"])
    assert (none.status_code, error(none)["code"]) == (404, "no_acknowledgement")
    unknown = api.acknowledgement("0" * 32)
    assert (unknown.status_code, error(unknown)["code"]) == (404, "job_not_found")
    scoped = Client("http://testserver", SCOPED_ID, SCOPED_SECRET, http=http)
    theirs = scoped.acknowledgement(x12)
    assert (theirs.status_code, error(theirs)["code"]) == (404, "job_not_found")
    assert http.get(f"/v1/jobs/{x12}/acknowledgement").status_code == 401


# --- settleq submit -----------------------------------------------------------------------


@pytest.mark.usefixtures("restore_logging")
def test_settleq_submit_prints_the_997_or_each_problem_of_a_refusal(
    api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batches, "make_client", lambda *args: api)
    good = tmp_path / "invoice.edi"
    good.write_bytes(freight_file(Freight(uid("F"), uid("C").upper())))
    sent = CliRunner().invoke(app, ["submit", str(good), "--contract-version", "1", "--no-wait"])
    assert sent.exit_code == 0, sent.output
    assert "accepted job" in sent.output and "997 accepting all 1 set(s):" in sent.output
    assert "GS*FA*" in sent.output

    bad = tmp_path / "broken.edi"
    bad.write_bytes(
        good.read_bytes().replace(b"SE*9*0001", b"SE*8*0001").replace(b"~\nGE", b"~\nGX")
    )
    refused = CliRunner().invoke(app, ["submit", str(bad), "--contract-version", "1"])
    assert refused.exit_code == 1
    # The CLI's own log lines (JSON, e.g. httpx's request) aside: a line per
    # problem, where it is (services/commands/errors.py), then the 997 it carries.
    lines = [line for line in refused.output.splitlines() if not line.startswith("{")]
    problems = [line for line in lines if line.startswith("settleq: 422 edi_")]
    assert problems and lines[: len(problems)] == problems
    assert any(": segment " in line for line in problems)
    assert lines[len(problems)].startswith(("997 rejecting ", "no 997: "))
    assert "Traceback" not in refused.output
