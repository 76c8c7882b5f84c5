"""Trading partners at the edges (docs/api.md#trading-partners, issue 42 round four), over HTTP in
process on a database of this module's own, with a second producer key of
all partitions: each key names its own interchanges; a profile's ``key_ids``;
each interchange of a file at its own sender's profile; a repeat after a
profile changed; what a partner's page counts and shows; the list's queries."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, select, update

from services.api.app import create_app
from services.commands.client import Client
from services.commands.intake.edi import verdict
from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import chunks, jobs
from shared.config.settings import ProducerKey
from shared.domain.x12.acknowledging.summary import summarize
from tests.support.factories import uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
    isolated_env,
)
from tests.support.x12_files import Freight, freight_file, next_control_number
from tests.unit.x12.build import REALDATA

X12 = "application/edi-x12"
OTHER_ID, OTHER_SECRET = "other", "test-secret-other-0003"
real = pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")


@pytest.fixture(scope="module")
def env() -> Iterator[ServiceEnv]:
    with isolated_env("pe") as found:
        found.overrides["producer_keys"] = [
            ProducerKey(key_id=PRODUCER_ID, secrets=[PRODUCER_SECRET], partitions=["*"]),
            ProducerKey(key_id=OTHER_ID, secrets=[OTHER_SECRET], partitions=["*"]),
        ]
        yield found


@pytest.fixture(scope="module")
def stack(env: ServiceEnv) -> Iterator[tuple[TestClient, Engine]]:
    with TestClient(create_app(env.settings())) as http:
        engine = make_engine(env.database_url)
        yield http, engine
        engine.dispose()


@pytest.fixture(scope="module")
def acme(stack: tuple[TestClient, Engine]) -> Client:
    return Client("http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=stack[0])


@pytest.fixture(scope="module")
def other(stack: tuple[TestClient, Engine]) -> Client:
    return Client("http://testserver", key_id=OTHER_ID, secret=OTHER_SECRET, http=stack[0])


@pytest.fixture(scope="module")
def operator(stack: tuple[TestClient, Engine]) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=stack[0])


@pytest.fixture(scope="module")
def viewer(stack: tuple[TestClient, Engine]) -> Client:
    return Client("http://testserver", token=VIEWER_TOKEN, http=stack[0])


def put_profile(operator: Client, sender: str, version: int, **extra: Any) -> None:
    body = {"name": f"partner {sender}", "contract_version": version, **extra}
    answer = operator.bearer("PUT", f"/v1/partners/ZZ/{sender}", body)
    assert answer.status_code in (200, 201), answer.text


def sender_name() -> str:
    return uid("S")[:15].upper()


def broken(sender: str) -> bytes:
    """A file of ``sender`` whose SE01 miscounts its set: refused, 997 ``R``."""
    return freight_file(Freight(uid("F"), "ABCD"), sender=sender).replace(
        b"SE*9*0001", b"SE*8*0001"
    )


def documents(engine: Engine, job_id: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        payloads = conn.execute(select(chunks.c.payload).where(chunks.c.job_id == job_id))
        return [d for p in payloads.scalars() for d in json.loads(p)]


def page(viewer: Client, sender: str) -> dict[str, Any]:
    answer = viewer.bearer("GET", f"/v1/partners/ZZ/{sender}")
    assert answer.status_code == 200, answer.text
    health: dict[str, Any] = answer.json()["health"]
    return health


# -- M3: each key's interchange namespace --------------------------------------------------------


@pytest.mark.regression
def test_another_keys_interchange_neither_blocks_nor_names_this_keys_file(
    acme: Client, other: Client, operator: Client
) -> None:
    sender, number = sender_name(), next_control_number()
    put_profile(operator, sender, 1)
    first = acme.submit(freight_file(Freight(uid("F"), "ABCD"), sender=sender, isa13=number), X12)
    assert first.status_code == 202, first.text
    genuine = freight_file(Freight(uid("F"), "ABCD"), sender=sender, isa13=number)
    mine = other.submit(genuine, X12)
    assert mine.status_code == 202, mine.text
    assert mine.json()["job_id"] != first.json()["job_id"]
    assert other.submit(genuine, X12).json()["job_id"] == mine.json()["job_id"]
    # Its own namespace still refuses its own reuse, naming its own job only.
    reused = other.submit(freight_file(Freight(uid("F"), "ABCD"), sender=sender, isa13=number), X12)
    assert reused.status_code == 409, reused.text
    error = reused.json()["error"]
    assert error["code"] == "edi_duplicate_interchange"
    assert [d["job_id"] for d in error["details"]] == [mine.json()["job_id"]]
    assert first.json()["job_id"] not in error["message"]


@pytest.mark.regression
def test_a_profile_naming_key_ids_refuses_every_other_key(
    acme: Client, other: Client, operator: Client
) -> None:
    sender = sender_name()
    put_profile(operator, sender, 1, key_ids=[OTHER_ID])
    refused = acme.submit(freight_file(Freight(uid("F"), "ABCD"), sender=sender), X12)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "edi_sender_not_allowed"
    # So is a file whose second interchange is that partner's.
    open_to_all = sender_name()
    put_profile(operator, open_to_all, 1)
    both = freight_file(Freight(uid("F"), "ABCD"), sender=open_to_all) + freight_file(
        Freight(uid("F"), "ABCD"), sender=sender
    )
    assert acme.submit(both, X12).json()["error"]["code"] == "edi_sender_not_allowed"
    allowed = other.submit(freight_file(Freight(uid("F"), "ABCD"), sender=sender), X12)
    assert allowed.status_code == 202, allowed.text
    shown = operator.bearer("GET", f"/v1/partners/ZZ/{sender}").json()
    assert shown["key_ids"] == [OTHER_ID]


# -- M4: each interchange at its own sender's profile -------------------------------------------


@pytest.mark.regression
def test_each_interchange_of_a_file_settles_at_its_own_senders_profile(
    acme: Client, operator: Client, stack: tuple[TestClient, Engine]
) -> None:
    first, second = sender_name(), sender_name()
    put_profile(operator, first, 1, partition_key="VENDOR-A")
    put_profile(operator, second, 2)
    body = freight_file(Freight(uid("F"), "ABCD"), sender=first) + freight_file(
        Freight(uid("F"), "WXYZ"), sender=second
    )
    answer = acme.submit(body, X12)
    assert answer.status_code == 202, answer.text
    found = {
        d["correlation_id"].split(":")[1]: d["contract_version"]
        for d in documents(stack[1], answer.json()["job_id"])
    }
    assert found == {first: 1, second: 2}


@pytest.mark.regression
def test_a_file_with_an_interchange_of_an_unknown_sender_is_refused_whole(
    acme: Client, operator: Client
) -> None:
    known, unknown = sender_name(), sender_name()
    put_profile(operator, known, 1)
    body = (
        freight_file(Freight(uid("F"), "ABCD"), sender=known)
        + freight_file(Freight(uid("F"), "ABCD"), sender=unknown)
        + freight_file(Freight(uid("F"), "ABCD"), sender=unknown)
    )
    answer = acme.submit(body, X12)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "edi_partner_unknown"
    assert unknown in error["message"]
    # Its interchange is rejected, and never acknowledged as accepted.
    ack = error["acknowledgement"]
    assert "*R*006" in ack
    said = summarize(ack, ("ZZ", unknown))
    assert said is not None and said.interchange_rejected
    assert (said.sets, said.accepted) == (2, 0)  # both its interchanges' sets
    assert [d["code"] for d in error["details"]] == ["edi_partner_unknown"] * 2


# -- M5: the same bytes after a profile change ---------------------------------------------------


@pytest.mark.regression
def test_the_same_bytes_after_a_profile_change_are_the_same_job(
    acme: Client, operator: Client
) -> None:
    sender = sender_name()
    put_profile(operator, sender, 1)
    body = freight_file(Freight(uid("F"), "ABCD"), sender=sender)
    first = acme.submit(body, X12)
    assert first.status_code == 202, first.text
    put_profile(operator, sender, 2, acknowledge="errors_only")
    again = acme.submit(body, X12)
    assert again.status_code == 200, again.text
    assert again.json()["job_id"] == first.json()["job_id"]


def test_a_job_stored_before_0024_is_still_its_files_repeat(
    acme: Client, operator: Client, stack: tuple[TestClient, Engine]
) -> None:
    """Stored with the query as the profile completed it (as before issue 42):
    the same bytes are its repeat while that profile stands."""
    sender = sender_name()
    put_profile(operator, sender, 3)
    body = freight_file(Freight(uid("F"), "ABCD"), sender=sender)
    first = acme.submit(body, X12)
    assert first.status_code == 202, first.text
    file_sha256 = hashlib.sha256(body).hexdigest()
    earlier = hashlib.sha256(f"x12\n{file_sha256}\n3\nNone\nNone".encode()).hexdigest()
    with stack[1].begin() as conn:
        conn.execute(
            update(jobs).where(jobs.c.id == first.json()["job_id"]).values(body_sha256=earlier)
        )
    again = acme.submit(body, X12)
    assert (again.status_code, again.json()["job_id"]) == (200, first.json()["job_id"])


# -- what a partner's page counts and shows ------------------------------------------------------


@pytest.mark.regression
def test_another_keys_garbage_does_not_count_against_a_partner(
    acme: Client, other: Client, operator: Client, viewer: Client
) -> None:
    """Without ``key_ids``, a refusal counts against a partner when its key has
    had a file of that partner accepted; with them, when its key is one."""
    sender = sender_name()
    put_profile(operator, sender, 1)
    assert (
        acme.submit(freight_file(Freight(uid("F"), "ABCD"), sender=sender), X12).status_code == 202
    )
    assert other.submit(broken(sender), X12).status_code == 422
    health = page(viewer, sender)
    assert (health["accepted_files"], health["refused_files"]) == (1, 0)
    metrics = operator.bearer("GET", "/metrics").text
    assert f'settleq_edi_files_refused_total{{partner="ZZ/{sender}"}}' not in metrics
    assert acme.submit(broken(sender), X12).status_code == 422
    health = page(viewer, sender)
    assert (health["refused_files"], health["refusal_rate"]) == (1, 0.5)
    metrics = operator.bearer("GET", "/metrics").text
    assert f'settleq_edi_files_refused_total{{partner="ZZ/{sender}"}} 1.0' in metrics
    # Named keys decide: acme's refusal no longer counts, other's does.
    put_profile(operator, sender, 1, key_ids=[OTHER_ID])
    assert page(viewer, sender)["refused_files"] == 1
    listed = viewer.bearer("GET", "/v1/partners").json()["items"]
    [mine] = [p for p in listed if p["isa_id"] == sender]
    assert mine["refusal_rate"] == 0.5


@pytest.mark.regression
def test_a_senders_page_counts_its_own_interchanges_sets(
    acme: Client, operator: Client, viewer: Client
) -> None:
    first, second = sender_name(), sender_name()
    put_profile(operator, first, 1)
    put_profile(operator, second, 1)
    body = freight_file(Freight(uid("F"), "ABCD"), sender=first) + freight_file(
        Freight(uid("F"), "ABCD"), Freight(uid("F"), "ABCD"), sender=second
    )
    assert acme.submit(body, X12).status_code == 202
    assert [f["sets_accepted"] for f in page(viewer, first)["files"]] == [1]
    assert [f["sets_accepted"] for f in page(viewer, second)["files"]] == [2]


@pytest.mark.regression
def test_a_partner_page_shows_a_refusals_message_and_997(
    acme: Client, operator: Client, viewer: Client
) -> None:
    sender = sender_name()
    put_profile(operator, sender, 1, key_ids=[PRODUCER_ID])
    refused = acme.submit(broken(sender), X12)
    assert refused.status_code == 422
    error = refused.json()["error"]
    [shown] = page(viewer, sender)["files"]
    assert shown["refusal_message"] == error["message"]
    assert shown["acknowledgement"] == error["acknowledgement"]
    assert (shown["sets_accepted"], shown["sets_refused"]) == (0, 1)


@real
@pytest.mark.regression
def test_a_refusals_heading_and_page_say_what_its_997_says(
    acme: Client, operator: Client, viewer: Client
) -> None:
    """DB Schenker's file: GE02 is not GS06, its AK9 rejects the group. The
    CLI's heading and the partner's page both read it from that 997."""
    body = (REALDATA / "x12_210/DBSchenker_SampleMotorFreightDetailsAndInvoice.txt").read_bytes()
    qualifier, sender = "14", "055001924INV"
    answer = operator.bearer(
        "PUT",
        f"/v1/partners/{qualifier}/{sender}",
        {"name": "DB Schenker", "contract_version": 1, "key_ids": [PRODUCER_ID]},
    )
    assert answer.status_code in (200, 201), answer.text
    refused = acme.submit(body, X12)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "edi_control_mismatch"
    ack = error["acknowledgement"]
    assert "AK9*R" in ack
    assert verdict(ack) == "997 rejecting 1 of 1 set(s)"
    shown = viewer.bearer("GET", f"/v1/partners/{qualifier}/{sender}").json()["health"]
    newest = shown["files"][0]
    assert (newest["sets_accepted"], newest["sets_refused"]) == (0, 1)


@pytest.mark.regression
def test_an_unknown_senders_fix_names_the_command_to_run(acme: Client) -> None:
    body = freight_file(Freight(uid("F"), "ABCD"), sender=sender_name())
    error = acme.submit(body, X12).json()["error"]
    assert error["code"] == "edi_partner_unknown"
    assert "settleq partners put ZZ " in error["message"]
    assert "/v1/partners" not in error["message"]


# -- a profile's values --------------------------------------------------------------------------


@pytest.mark.regression
@pytest.mark.parametrize(
    ("path", "change", "code"),
    [
        ("/v1/partners/ZZ/BOOLEAN", {"contract_version": True}, "int_type"),
        ("/v1/partners/zz/LOWER", {}, "partner_sender_invalid"),
        ("/v1/partners/ZZ/NOKEYS", {"key_ids": []}, "too_short"),
    ],
)
def test_a_profile_refuses_a_boolean_version_and_a_lower_case_qualifier(
    operator: Client, path: str, change: dict[str, Any], code: str
) -> None:
    answer = operator.bearer("PUT", path, {"name": "X", "contract_version": 1, **change})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == code


# -- the list's queries --------------------------------------------------------------------------


@pytest.mark.regression
def test_the_partner_list_reads_the_same_number_of_queries_for_1_or_20_partners(
    env: ServiceEnv, acme: Client
) -> None:
    counts = []
    for partners in (1, 20):
        with isolated_env("pl") as own, TestClient(create_app(own.settings())) as http:
            operator = Client("http://testserver", token=OPERATOR_TOKEN, http=http)
            producer = Client(
                "http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=http
            )
            for _ in range(partners):
                sender = sender_name()
                put_profile(operator, sender, 1, key_ids=[PRODUCER_ID])
                assert producer.submit(broken(sender), X12).status_code == 422
            statements: list[str] = []
            engine = http.app.state.ctx.engine  # type: ignore[attr-defined]

            def count(*args: Any, seen: list[str] = statements) -> None:
                seen.append(args[2])

            event.listen(engine, "before_cursor_execute", count)
            try:
                listed = Client("http://testserver", token=VIEWER_TOKEN, http=http).bearer(
                    "GET", "/v1/partners"
                )
            finally:
                event.remove(engine, "before_cursor_execute", count)
            assert listed.status_code == 200 and len(listed.json()["items"]) == partners
            assert all(p["refusal_rate"] == 1.0 for p in listed.json()["items"])
            counts.append(len(statements))
    assert counts[0] == counts[1] <= 2, counts
