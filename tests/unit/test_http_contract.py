"""Issue 15 item 7: the server's HTTP answers and openapi.yaml's constraints agree.

405s carry ``Allow``; ``GET /admin/dead-letters/requeue`` is a 405, not a
422 ``int_parsing``; and what the server refuses for its shape is refused by
the published schema too (tests/integration/test_schemathesis.py fuzzes both
ways with schemathesis' negative- and positive-data checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from fastapi.testclient import TestClient

from services.api.app import create_app
from shared.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    # Routing answers 404/405 before any dependency: no lifespan, no services.
    url = f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'x.db'}"
    return TestClient(create_app(Settings(database_url=url)))


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    return loaded


@pytest.mark.regression
@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/admin/dead-letters/requeue", "POST"),
        ("DELETE", "/v1/jobs", "GET"),
        ("GET", "/v1/batches", "POST"),
        ("POST", "/admin/dead-letters/7", "GET"),
        ("GET", "/admin/dead-letters/7/requeue", "POST"),
    ],
)
def test_a_405_names_the_methods_allowed(
    client: TestClient, method: str, path: str, allow: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allow
    assert response.json()["error"]["code"] == "method_not_allowed"


def _component(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """A component schema with its references resolvable."""
    return {**spec["components"]["schemas"][name], "components": spec["components"]}


def _valid(schema: dict[str, Any], value: Any) -> bool:
    resolver = jsonschema.validators.Draft202012Validator(
        schema, format_checker=jsonschema.FormatChecker()
    )
    return resolver.is_valid(value)


def _ref_resolving(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "components": spec["components"]}


def _parameter(spec: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    [found] = [p for p in spec["paths"][path][method]["parameters"] if p["name"] == name]
    schema: dict[str, Any] = found["schema"]
    return schema


@pytest.mark.regression
def test_each_kind_publishes_its_own_contract_body(spec: dict[str, Any]) -> None:
    assert "put" not in spec["paths"]["/v1/contracts/{kind}/{partition_key}/{version}"]
    bodies = {
        "promo_accrual": {"tier_rates": {"T1": "0.05"}, "tolerance": "0.01"},
        "freight_audit": {"rate_per_mile": "2.5", "tolerance": "1"},
        "recipe_cost": {"bom": {"SKU-1": "2"}},
    }
    for kind, body in bodies.items():
        put = spec["paths"][f"/v1/contracts/{kind}/{{partition_key}}/{{version}}"]["put"]
        schema = _ref_resolving(spec, put["requestBody"]["content"]["application/json"]["schema"])
        assert _valid(schema, body), kind
        assert not _valid(schema, {}), kind  # the server refuses {}
        for other, other_body in bodies.items():
            if other != kind:
                assert not _valid(schema, other_body), (kind, other)
    freight = _component(spec, "FreightContract")
    assert not _valid(freight, {"tolerance": "1"})  # "needs rate_per_mile or rates"
    assert not _valid(freight, {"tolerance": "1", "rates": {}})
    promo = _component(spec, "PromoContract")
    assert not _valid(promo, {"tier_rates": {"T\x001": "0.05"}, "tolerance": "0.01"})


@pytest.mark.regression
@pytest.mark.parametrize("text", ["-6e384", "1E+3", "1.00001", "1234567890123", "+1", ".5"])
def test_money_strings_the_schema_allows_are_plain_and_in_range(
    spec: dict[str, Any], text: str
) -> None:
    promo = _component(spec, "PromoContract")
    assert _valid(promo, {"tier_rates": {"T1": "0.05"}, "tolerance": "16.65"})
    assert not _valid(promo, {"tier_rates": {"T1": "0.05"}, "tolerance": text})


@pytest.mark.regression
def test_cursors_and_path_parameters_publish_their_shape(spec: dict[str, Any]) -> None:
    for path, method in (("/v1/jobs", "get"), ("/admin/audit", "get")):
        cursor = _parameter(spec, path, method, "cursor")["anyOf"][0]
        assert _valid(cursor, "MTIz")  # base64url of "123"
        for refused in ("0", "", "a" * 129, "MTIz=", "a+b/"):
            assert not _valid(cursor, refused), refused
    job_id = _parameter(spec, "/v1/jobs/{job_id}", "get", "job_id")
    assert _valid(job_id, "abc") and not _valid(job_id, "a\x00b") and not _valid(job_id, "")
    partition = _parameter(spec, "/v1/contracts/{kind}/{partition_key}", "get", "partition_key")
    assert not _valid(partition, "V\n1")


@pytest.mark.regression
def test_contract_version_is_an_integer(spec: dict[str, Any]) -> None:
    promo_document = _component(spec, "PromoDocument")
    version = promo_document["properties"]["contract_version"]
    assert version["type"] == "integer" and version["minimum"] == 1
    assert not _valid(version, "1") and not _valid(version, 1.5) and not _valid(version, 0)


@pytest.mark.regression
def test_opened_before_publishes_the_times_the_server_reads(spec: dict[str, Any]) -> None:
    opened = _parameter(spec, "/v1/disputes", "get", "opened_before")
    for text in ("2026-01-31T00:00:00Z", "2026-01-31T00:00+02:00", "2026-01-31T00:00:00.5Z"):
        assert _valid(opened, text), text
    for text in ("0000-01-01T00:00Z", "2026-13-01T00:00Z", "yesterday", "2026-01-31T00:00"):
        assert not _valid(opened, text), text
