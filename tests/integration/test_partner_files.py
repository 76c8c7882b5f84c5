"""X12 files with no query string, settled at their sender's trading-partner
profile (docs/api.md#trading-partners), over HTTP in process on a database
of this module's own: every accepted real file of ../shared/realdata (skipped
when it is absent) at the profile's contract version; the query winning over
the profile; a sender without a profile refused ``edi_partner_unknown`` with a
997 rejecting it; the ``errors_only`` and ``never`` policies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from services.api.app import create_app
from services.commands.client import Client
from services.worker.actors import build_broker
from services.worker.context import WorkerContext, make_context
from services.worker.stages import settle_chunk
from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import chunks, ledger_entries, line_outcomes
from shared.domain.pipeline.messages import ChunkMessage
from shared.domain.x12.reading.envelope import sender_of
from tests.support.factories import uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
    isolated_env,
)
from tests.support.x12_files import Freight, freight_contract, freight_file
from tests.unit.x12.build import REALDATA

X12 = "application/edi-x12"
# The real files test_realdata.py accepts: each partner's own quirks.
ACCEPTED = [
    "x12_210/210-MGCTLYST-SAMPLE.EDI",
    "x12_210/CN_FreightInvoiceSample1.txt",
    "x12_210/FreightInvoice.txt",
    "x12_210/ts210_80char.edi",
    "x12_810/Example5_Walmart.txt",
]
real = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")


@pytest.fixture(scope="module")
def env() -> Iterator[ServiceEnv]:
    with isolated_env("pf") as found:
        yield found


@pytest.fixture(scope="module")
def stack(env: ServiceEnv) -> Iterator[tuple[TestClient, Engine]]:
    with TestClient(create_app(env.settings())) as http:
        engine = make_engine(env.database_url)
        yield http, engine
        engine.dispose()


@pytest.fixture(scope="module")
def worker_ctx(env: ServiceEnv) -> Iterator[WorkerContext]:
    """A worker's context on this module's database, to settle in process."""
    settings = env.settings()
    broker = build_broker(settings)
    context = make_context(settings, broker)
    yield context
    context.engine.dispose()
    broker.close()


@pytest.fixture(scope="module")
def producer(stack: tuple[TestClient, Engine]) -> Client:
    return Client("http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=stack[0])


@pytest.fixture(scope="module")
def operator(stack: tuple[TestClient, Engine]) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=stack[0])


def profile(operator: Client, body: bytes, version: int, **extra: Any) -> tuple[str, str]:
    sender = sender_of(body)
    assert sender is not None
    qualifier, sender_id = sender
    answer = operator.bearer(
        "PUT",
        f"/v1/partners/{qualifier}/{sender_id}",
        {"name": f"partner {sender_id}", "contract_version": version, **extra},
    )
    assert answer.status_code in (200, 201), answer.text
    return qualifier, sender_id


def versions(engine: Engine, job_id: str) -> set[int]:
    """The contract versions the job's stored documents settle under."""
    with engine.connect() as conn:
        payloads = conn.execute(select(chunks.c.payload).where(chunks.c.job_id == job_id))
        return {
            int(v) for p in payloads.scalars() for v in re.findall(rb'"contract_version":(\d+)', p)
        }


def renumbered(body: bytes, number: int) -> bytes:
    """The same file as another interchange: its ISA13 and IEA02 replaced."""
    sender = sender_of(body)
    assert sender is not None
    element = body.lstrip(b"\xef\xbb\xbf \r\n\t")[3:4]
    isa = body.split(element)
    old = isa[13]
    assert len(old) == 9 and old.isdigit(), old
    return body.replace(old, b"%09d" % number)


@real
@pytest.mark.parametrize("name", ACCEPTED)
def test_a_real_file_with_no_query_settles_at_its_profiles_version(
    name: str, producer: Client, operator: Client, stack: tuple[TestClient, Engine]
) -> None:
    body = (REALDATA / name).read_bytes()
    profile(operator, body, 4)
    answer = producer.submit(body, X12)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job_id"]
    assert versions(stack[1], job_id) == {4}
    assert answer.json()["acknowledgement_url"] == f"/v1/jobs/{job_id}/acknowledgement"
    ack = producer.acknowledgement(job_id)
    assert ack.status_code == 200 and "AK5*A" in ack.text.replace(ack.text[3], "*")


@real
def test_the_query_wins_over_the_profile(
    producer: Client, operator: Client, stack: tuple[TestClient, Engine]
) -> None:
    body = renumbered((REALDATA / ACCEPTED[0]).read_bytes(), 424242)
    profile(operator, body, 4)
    answer = producer.submit(body, X12, query={"contract_version": 9})
    assert answer.status_code == 202, answer.text
    assert versions(stack[1], answer.json()["job_id"]) == {9}


def test_a_sender_without_a_profile_is_refused_with_a_rejecting_997(producer: Client) -> None:
    body = freight_file(Freight(uid("F"), "ABCD"), sender=uid("NP")[:15].upper())
    answer = producer.submit(body, X12)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "edi_partner_unknown"
    [detail] = error["details"]
    assert (detail["tag"], detail["element"]) == ("ISA", 6)
    assert "settleq partners put ZZ " in error["message"]
    assert "TA1*" in error["acknowledgement"] and "*R*006" in error["acknowledgement"]
    # Issue 52: every set rejected, none accepted (it said AK5*A beside AK9*R*1*1*1).
    ack = [row.strip() for row in error["acknowledgement"].split("~")]
    assert [row for row in ack if row.startswith("AK5")] == ["AK5*R"]
    assert [row for row in ack if row.startswith("AK9")] == ["AK9*R*1*1*0"]


def test_errors_only_acknowledges_refusals_only(producer: Client, operator: Client) -> None:
    sender = uid("EO")[:15].upper()
    good = freight_file(Freight(uid("F"), "ABCD"), sender=sender)
    profile(operator, good, 1, acknowledge="errors_only")
    accepted = producer.submit(good, X12)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["acknowledgement_url"] is None
    missing = producer.acknowledgement(accepted.json()["job_id"])
    assert missing.status_code == 404
    assert "profile" in missing.json()["error"]["message"]
    broken = freight_file(Freight(uid("F"), "ABCD"), sender=sender).replace(
        b"SE*9*0001", b"SE*8*0001"
    )
    refused = producer.submit(broken, X12)
    assert refused.status_code == 422
    assert "AK5*R" in refused.json()["error"]["acknowledgement"]


def test_never_acknowledges_nothing_and_still_explains(producer: Client, operator: Client) -> None:
    sender = uid("NV")[:15].upper()
    good = freight_file(Freight(uid("F"), "ABCD"), sender=sender)
    profile(operator, good, 1, acknowledge="never")
    accepted = producer.submit(good, X12)
    assert accepted.status_code == 202 and accepted.json()["acknowledgement_url"] is None
    broken = freight_file(Freight(uid("F"), "ABCD"), sender=sender).replace(
        b"SE*9*0001", b"SE*8*0001"
    )
    refused = producer.submit(broken, X12)
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["acknowledgement"] is None
    assert error["code"] == "edi_count_mismatch" and error["details"][0]["tag"] == "SE"


def test_a_210_partners_profile_may_name_an_810_partition(
    producer: Client, operator: Client, stack: tuple[TestClient, Engine]
) -> None:
    """The profile's partition and period serve its 810s; its 210s settle
    under their carrier, not refused as a query naming them would be."""
    sender = uid("PP")[:15].upper()
    body = freight_file(Freight(uid("F"), "ABCD"), sender=sender)
    profile(operator, body, 3, partition_key="VENDOR-9", period="2026-Q3")
    answer = producer.submit(body, X12)
    assert answer.status_code == 202, answer.text
    assert versions(stack[1], answer.json()["job_id"]) == {3}


def test_the_partner_page_counts_what_the_ledger_and_dead_letters_hold(
    producer: Client, operator: Client, stack: tuple[TestClient, Engine], worker_ctx: Any
) -> None:
    """Four files of one partner: one posts, one disputes, one waits in dead
    letters (its carrier has no contract), one is refused. Settled in process."""
    engine = stack[1]
    ctx = worker_ctx
    priced, unpriced = uid("P").upper()[:8], uid("U").upper()[:8]
    path = f"/v1/contracts/freight_audit/{priced}/1"
    assert operator.bearer("PUT", path, freight_contract()).status_code == 201
    sender = uid("HP")[:15].upper()
    files = [
        freight_file(Freight(uid("F"), priced), sender=sender),
        freight_file(Freight(uid("F"), priced, linehaul="300.00"), sender=sender),  # overclaims
        freight_file(Freight(uid("F"), unpriced), sender=sender),
    ]
    qualifier, _ = profile(operator, files[0], 1)
    job_ids = []
    for body in files:
        answer = producer.submit(body, X12)
        assert answer.status_code == 202, answer.text
        job_ids.append(answer.json()["job_id"])
    broken = freight_file(Freight(uid("F"), priced), sender=sender).replace(
        b"SE*9*0001", b"SE*8*0001"
    )
    assert producer.submit(broken, X12).status_code == 422
    with engine.connect() as conn:
        stored = conn.execute(
            select(chunks.c.id, chunks.c.job_id, chunks.c.kind, chunks.c.payload_sha256).where(
                chunks.c.job_id.in_(job_ids)
            )
        ).all()
    for c in stored:
        settle_chunk(ctx, ChunkMessage(c.id, c.job_id, c.kind, c.payload_sha256).signed(
            ctx.internal_key
        ), 1)  # fmt: skip
    page = Client("http://testserver", token=VIEWER_TOKEN, http=stack[0]).bearer(
        "GET", f"/v1/partners/{qualifier}/{sender}"
    )
    assert page.status_code == 200, page.text
    health = page.json()["health"]
    with engine.connect() as conn:
        waiting = conn.execute(
            select(line_outcomes.c.reason, func.count())
            .where(line_outcomes.c.job_id.in_(job_ids), line_outcomes.c.outcome == "dead_lettered")
            .group_by(line_outcomes.c.reason)
        ).all()
        disputed = conn.execute(
            select(ledger_entries.c.claimed_amount, ledger_entries.c.amount).where(
                ledger_entries.c.job_id.in_(job_ids), ledger_entries.c.outcome == "disputed"
            )
        ).all()
    assert health["dead_letters"] == {r: n for r, n in waiting} == {"unknown_contract_version": 1}
    assert health["open_disputes"]["count"] == len(disputed) == 1
    variance = sum(Decimal(c) - Decimal(a) for c, a in disputed)
    assert Decimal(health["open_disputes"]["variance"]) == variance == Decimal("85")
    assert (health["accepted_files"], health["refused_files"]) == (3, 1)
    assert health["refusal_rate"] == 0.25
    newest = health["files"][0]
    assert newest["job_id"] is None and newest["refusal_codes"] == ["edi_count_mismatch"]
    assert {f["job_id"] for f in health["files"][1:]} == set(job_ids)
    listed = Client("http://testserver", token=VIEWER_TOKEN, http=stack[0]).bearer(
        "GET", "/v1/partners"
    )
    [mine] = [p for p in listed.json()["items"] if p["isa_id"] == sender]
    assert mine["refusal_rate"] == 0.25 and mine["last_file_at"] == newest["received_at"]
    metrics = operator.bearer("GET", "/metrics").text
    assert f'settleq_edi_files_refused_total{{partner="{qualifier}/{sender}"}} 1.0' in metrics
