"""X12 files with no query string, settled at their sender's trading-partner
profile (docs/api.md#trading-partners), over HTTP in process on a database
of this module's own: every accepted real file of ../shared/realdata (skipped
when it is absent) at the profile's contract version; the query winning over
the profile; a sender without a profile refused ``edi_partner_unknown`` with a
997 rejecting it; the ``errors_only`` and ``never`` policies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from services.api.app import create_app
from services.client import Client
from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import chunks
from shared.domain.x12.envelope import sender_of
from tests.support.factories import uid
from tests.support.infra import OPERATOR_TOKEN, PRODUCER_ID, PRODUCER_SECRET, isolated_env
from tests.support.x12_files import Freight, freight_file
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
def stack() -> Iterator[tuple[TestClient, Engine]]:
    with isolated_env("pf") as env, TestClient(create_app(env.settings())) as http:
        engine = make_engine(env.database_url)
        yield http, engine
        engine.dispose()


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
    assert "PUT /v1/partners/ZZ/" in error["message"]
    assert "TA1*" in error["acknowledgement"] and "*R*006" in error["acknowledgement"]


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
