"""Trading-partner profiles over HTTP in process (docs/api.md#trading-partners),
on each ledger backend: an operator puts them (audited), a viewer reads them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from services.api.app import create_app
from services.commands.client import Client
from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import audit_log
from tests.support.factories import uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


@pytest.fixture(scope="module")
def viewer(http: TestClient) -> Client:
    return Client("http://testserver", token=VIEWER_TOKEN, http=http)


def test_a_profile_is_put_replaced_read_and_audited(
    operator: Client, viewer: Client, backend_env: ServiceEnv
) -> None:
    sender = uid("MG")[:15]
    path = f"/v1/partners/02/{sender}"
    body = {"name": "Magic Catalyst", "contract_version": 2}
    created = operator.bearer("PUT", path, body)
    assert created.status_code == 201, created.text
    assert created.json() | {"updated_at": ""} == {
        "isa_qualifier": "02",
        "isa_id": sender,
        "name": "Magic Catalyst",
        "contract_version": 2,
        "partition_key": None,
        "period": None,
        "acknowledge": "always",
        "key_ids": None,
        "payer_partition_key": None,
        "tolerance": None,
        "deduction_reasons": None,
        "dispute_window_days": None,
        "updated_at": "",
    }
    again = {**body, "contract_version": 3, "acknowledge": "errors_only", "period": "2026-Q3"}
    replaced = operator.bearer("PUT", path, again)
    assert replaced.status_code == 200 and replaced.json()["contract_version"] == 3
    shown = viewer.bearer("GET", path).json()
    assert shown["acknowledge"] == "errors_only" and shown["period"] == "2026-Q3"
    assert sender in {p["isa_id"] for p in viewer.bearer("GET", "/v1/partners").json()["items"]}
    engine = make_engine(backend_env.database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(audit_log.c.action, audit_log.c.actor).where(
                audit_log.c.target == f"02/{sender}"
            )
        ).all()
    engine.dispose()
    assert [r.action for r in rows] == ["partner.put", "partner.put"]
    assert all(r.actor.startswith("operator:") for r in rows)


def test_a_payers_deduction_profile_is_kept_as_given(operator: Client, viewer: Client) -> None:
    path = f"/v1/partners/ZZ/{uid('PR')[:15]}"
    payer = {
        "name": "Payer",
        "contract_version": 1,
        "payer_partition_key": "V-PAYER",
        "tolerance": {"absolute": "5.00", "percent": "2"},
        "deduction_reasons": {"70": "promotion", "ZZ": "pricing"},
        "dispute_window_days": 10,
    }
    assert operator.bearer("PUT", path, payer).status_code == 201
    shown = viewer.bearer("GET", path).json()
    assert shown["payer_partition_key"] == "V-PAYER"
    assert shown["deduction_reasons"] == {"70": "promotion", "ZZ": "pricing"}
    assert shown["dispute_window_days"] == 10
    assert set(shown["tolerance"]) == {"absolute", "percent"}


def test_profiles_refuse_viewers_bad_senders_and_bad_values(
    operator: Client, viewer: Client, http: TestClient
) -> None:
    body = {"name": "X", "contract_version": 1}
    assert viewer.bearer("PUT", "/v1/partners/ZZ/ACME", body).status_code == 403
    assert http.get("/v1/partners").status_code == 401
    cases = [
        ("/v1/partners/Z/ACME", body, "partner_sender_invalid"),
        ("/v1/partners/ZZ/ABCDEFGHIJKLMNOP", body, "partner_sender_invalid"),
        ("/v1/partners/ZZ/ACME", {**body, "acknowledge": "sometimes"}, "literal_error"),
        ("/v1/partners/ZZ/ACME", {**body, "contract_version": 0}, "greater_than_equal"),
        ("/v1/partners/ZZ/ACME", {**body, "extra": 1}, "extra_forbidden"),
        ("/v1/partners/ZZ/ACME", {**body, "tolerance": {"percent": "101"}}, "tolerance_invalid"),
        ("/v1/partners/ZZ/ACME", {**body, "tolerance": {"absolute": "-1"}}, "tolerance_invalid"),
    ]
    for path, sent, code in cases:
        answer = operator.bearer("PUT", path, sent)
        assert answer.status_code == 422, (path, sent, answer.text)
        assert answer.json()["error"]["code"] == code, answer.text
    missing = viewer.bearer("GET", "/v1/partners/ZZ/NOBODY-AT-ALL")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "partner_not_found"
