"""A partition's counterparty in the ERP (docs/api.md#a-partitions-erp-counterparty),
over HTTP in process on each ledger backend: an operator puts it (audited), a
viewer reads it, and ``settleq partitions`` does both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from typer.testing import CliRunner

from services.api.app import create_app
from services.commands import options
from services.commands.cli import app
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


def test_a_counterparty_is_put_replaced_read_and_audited(
    operator: Client, viewer: Client, backend_env: ServiceEnv
) -> None:
    partition = uid("V-")
    path = f"/v1/partitions/{partition}"
    assert viewer.bearer("GET", path).json()["error"]["code"] == "partition_not_found"
    created = operator.bearer("PUT", path, {"erp_counterparty": "VEND-00042"})
    assert created.status_code == 201, created.text
    assert created.json() | {"updated_at": ""} == {
        "partition_key": partition,
        "erp_counterparty": "VEND-00042",
        "updated_at": "",
    }
    replaced = operator.bearer("PUT", path, {"erp_counterparty": None})
    assert replaced.status_code == 200 and replaced.json()["erp_counterparty"] is None
    shown = viewer.bearer("GET", path)
    assert shown.status_code == 200 and shown.json()["erp_counterparty"] is None
    engine = make_engine(backend_env.database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(audit_log.c.action, audit_log.c.actor, audit_log.c.details).where(
                audit_log.c.target == partition
            )
        ).all()
    engine.dispose()
    assert [r.action for r in rows] == ["partition.put", "partition.put"]
    assert all(r.actor.startswith("operator:") for r in rows)
    assert '"erp_counterparty": "VEND-00042"' in rows[0].details


def test_bad_puts_are_refused_with_their_code(
    operator: Client, viewer: Client, http: TestClient
) -> None:
    body = {"erp_counterparty": "X"}
    assert viewer.bearer("PUT", "/v1/partitions/V-1", body).status_code == 403
    assert http.get("/v1/partitions/V-1").status_code == 401
    cases = [
        ("/v1/partitions/V%7C1", body, "partition_key_invalid"),
        ("/v1/partitions/V-1", {"erp_counterparty": ""}, "string_too_short"),
        ("/v1/partitions/V-1", {"erp_counterparty": "x" * 65}, "string_too_long"),
        ("/v1/partitions/V-1", {"erp_counterparty": "a\tb"}, "string_pattern_mismatch"),
        ("/v1/partitions/V-1", {}, "missing"),
        ("/v1/partitions/V-1", {**body, "entity": "US01"}, "extra_forbidden"),
    ]
    for path, sent, code in cases:
        answer = operator.bearer("PUT", path, sent)
        assert answer.status_code == 422, (path, sent, answer.text)
        assert answer.json()["error"]["code"] == code, answer.text


class InProcess(Client):
    def close(self) -> None:
        """The app's client is the module's: a command does not close it."""


def test_the_cli_puts_and_shows_it(http: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    partition = uid("V-")

    def make_client(url: str, key_id: Any, secret: Any, token: Any) -> Client:
        return InProcess("http://testserver", token=token, http=http)

    monkeypatch.setattr(options, "make_client", make_client)
    runner = CliRunner()
    put = [
        "partitions",
        "put",
        partition,
        "--erp-counterparty",
        "VEND-7",
        "--token",
        OPERATOR_TOKEN,
    ]
    result = runner.invoke(app, put)
    assert result.exit_code == 0, result.output
    assert f"set partition {partition}: ERP counterparty VEND-7" in result.output
    shown = runner.invoke(app, ["partitions", "show", partition, "--token", VIEWER_TOKEN])
    assert shown.exit_code == 0 and "ERP counterparty VEND-7 (updated " in shown.output
    unknown = runner.invoke(app, ["partitions", "show", uid("V-"), "--token", VIEWER_TOKEN])
    assert unknown.exit_code == 1 and "404 partition_not_found" in str(unknown.exception)
