"""A partition's contract URLs on a real server (docs/api.md#contracts, issue 29
item 6): uvicorn decodes a path once, as any HTTP server does, where the
in-process TestClient decodes it twice; so the partitions holding a
percent-escape as text are tried here. Every partition the rule allows is
published, read and listed at its percent-encoded URL, by the API and by
``settleq contracts``; one it refuses is 422 on every route, never a 404,
whether its slash comes encoded or not."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote, urlencode

import httpx
import pytest

from services.commands.client import Client
from shared.domain.synthetic import promo_contract
from tests.e2e.conftest import ARTIFACTS
from tests.support.cli import client_environ, run_settleq
from tests.support.factories import uid
from tests.support.infra import OPERATOR_TOKEN, ServiceEnv
from tests.support.stack import Stack

KIND = "promo_accrual"


@pytest.fixture(scope="module")
def api(stack_env: ServiceEnv) -> Iterator[Stack]:
    """The API alone: no route here needs a worker."""
    logs = ARTIFACTS / "logs" / "test_contract_urls"
    logs.mkdir(parents=True, exist_ok=True)
    running = Stack(stack_env, logs)
    try:
        running.start_api()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def operator(api: Stack) -> Client:
    return api.operator()


def segment(partition: str) -> str:
    return quote(partition, safe="").replace(".", "%2E")


@pytest.mark.regression
@pytest.mark.parametrize(
    "text",
    ["V%2FX", "V%00", "%", "%25", "Caf\u00e9 %41 ?#&+", "a.b", "...", "\u0412\u0415\u041d 7"],
)
def test_a_partition_holding_a_percent_escape_as_text_is_addressed_as_itself(
    operator: Client, text: str
) -> None:
    partition = f"{text}-{uid()}"
    at = f"/v1/contracts/{KIND}/{segment(partition)}"
    published = operator.bearer("PUT", f"{at}/1", promo_contract())
    assert published.status_code == 201, published.text
    assert published.json()["partition_key"] == partition
    assert operator.bearer("GET", f"{at}/1").json()["partition_key"] == partition
    assert operator.bearer("GET", at).json()["partition_key"] == partition
    listed = operator.bearer("GET", f"/v1/contracts?{urlencode({'partition_key': partition})}")
    assert [c["partition_key"] for c in listed.json()["items"]] == [partition]


@pytest.mark.regression
@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("A%2FB", "partition_key_invalid"),
        ("A/B", "partition_key_invalid"),
        ("%2E%2E", "partition_key_invalid"),
        ("%20A", "partition_key_invalid"),
        ("A%E2%80%8B", "partition_key_invalid"),
        ("A%00", "invalid_characters"),  # a control character: refused before any route
    ],
)
def test_a_partition_the_rule_refuses_is_422_on_a_real_server(
    api: Stack, raw: str, code: str
) -> None:
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    with httpx.Client(base_url=api.url, headers=headers, timeout=30) as http:
        for method, tail in [("PUT", "/1"), ("GET", "/1"), ("GET", "")]:
            if raw == "A/B" and not tail:
                continue  # /v1/contracts/{kind}/A/B is version "B" of "A": another address
            url = f"/v1/contracts/{KIND}/{raw}{tail}"
            body = promo_contract() if method == "PUT" else None
            response = http.request(method, url, json=body)
            assert response.status_code == 422, (method, url, response.text)
            assert response.json()["error"]["code"] == code, (method, url, response.text)


def test_settleq_contracts_addresses_any_partition_the_rule_allows(
    api: Stack, stack_env: ServiceEnv
) -> None:
    partition = f"Caf\u00e9 %2F ?#{uid()}"
    env = {**client_environ(stack_env.queue_prefix, token=OPERATOR_TOKEN), "SETTLEQ_URL": api.url}
    put = ["contracts", "put", KIND, partition, "1", "-"]
    done = run_settleq(put, env, stdin='{"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}')
    assert done.returncode == 0, done.stderr
    got = run_settleq(["contracts", "get", KIND, partition, "1"], env)
    assert got.returncode == 0 and partition in got.stdout, got.stderr
    listed = run_settleq(["contracts", "list", "--limit", "500"], env)
    assert listed.returncode == 0 and partition in listed.stdout.replace("\n", ""), listed.stderr
