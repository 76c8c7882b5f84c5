"""The dead-letter API and the audit log, over HTTP in process
(docs/api.md#dead-letters-and-the-audit-log), on each ledger backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.domain.signing import token_digest
from shared.domain.synthetic import promo_contract
from tests.support.factories import (
    promo_doc,
    promo_line,
    publish_promo_contracts,
    store_job,
    uid,
)
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv, queue_depth

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


@pytest.fixture
def dead_job(ctx: WorkerContext) -> tuple[str, str]:
    """A settled job with 3 dead letters: two documents of an unknown contract,
    and one unknown-tier line."""
    vendor = uid("DL-")
    docs = [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00")]),
        promo_doc(vendor, [promo_line(1, "8", "1.00")]),
    ]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    settle_chunk(ctx, message, 1)
    return job_id, vendor


def test_operator_endpoints_refuse_missing_and_viewer_tokens(http: TestClient) -> None:
    viewer = Client("http://testserver", token=VIEWER_TOKEN, http=http)
    for method, path in [
        ("GET", "/admin/dead-letters"),
        ("GET", "/admin/dead-letters/stats"),
        ("GET", "/admin/dead-letters/1"),
        ("POST", "/admin/dead-letters/1/requeue"),
        ("POST", "/admin/dead-letters/requeue"),
        ("POST", "/admin/dead-letters/1/discard"),
        ("GET", "/admin/audit"),
    ]:
        assert http.request(method, path).status_code == 401, path
        response = viewer.bearer(method, path)
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "forbidden"


def test_list_filter_show_and_stats(operator: Client, dead_job) -> None:
    job_id, vendor = dead_job
    page = operator.bearer("GET", f"/admin/dead-letters?job_id={job_id}&limit=1").json()
    assert len(page["items"]) == 1 and page["next_cursor"]
    rest = operator.bearer(
        "GET", f"/admin/dead-letters?job_id={job_id}&cursor={page['next_cursor']}"
    ).json()
    letters = page["items"] + rest["items"]
    assert rest["next_cursor"] is None and len(letters) == 2
    assert {(d["reason"], d["lines"], d["status"]) for d in letters} == {
        ("unknown_contract_version", 2, "dead"),
        ("unknown_contract_version", 1, "dead"),
    }
    assert all(d["partition_key"] == vendor and d["line_ref"] is None for d in letters)
    detail = operator.bearer("GET", f"/admin/dead-letters/{letters[0]['id']}").json()
    assert detail["payload"]["document_id"] == letters[0]["document_id"]
    assert detail["attempts"] == 1 and detail["error_class"] == "BusinessError"
    by_reason = operator.bearer(
        "GET", f"/admin/dead-letters?reason=unknown_contract_version&partition_key={vendor}"
    ).json()
    assert len(by_reason["items"]) == 2
    stats = operator.bearer("GET", "/admin/dead-letters/stats").json()
    counts = {(s["reason"], s["status"]): s["count"] for s in stats["items"]}
    assert counts[("unknown_contract_version", "dead")] >= 2
    assert operator.bearer("GET", "/admin/dead-letters/999999999").status_code == 404


def test_requeue_once_and_only_once_with_an_audit_trail(
    operator: Client, dead_job, backend_env: ServiceEnv, ctx: WorkerContext
) -> None:
    job_id, vendor = dead_job
    publish_promo_contracts(ctx.engine, [vendor])  # so that a requeue can settle
    letters = operator.bearer("GET", f"/admin/dead-letters?job_id={job_id}").json()["items"]
    depth = queue_depth(backend_env.queue_prefix, "fast_path")
    first = operator.bearer("POST", f"/admin/dead-letters/{letters[0]['id']}/requeue")
    assert first.status_code == 200 and first.json() == {"requeued": 1}
    again = operator.bearer("POST", f"/admin/dead-letters/{letters[0]['id']}/requeue")
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_requeueable"
    bulk = operator.bearer("POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 10})
    # only the one still dead
    assert bulk.json() == {"requeued": 1, "skipped": 0, "would_fail_again": {}}
    assert operator.bearer(
        "POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 10}
    ).json() == {"requeued": 0, "skipped": 0, "would_fail_again": {}}
    assert queue_depth(backend_env.queue_prefix, "fast_path") == depth + 2
    audit = operator.bearer("GET", "/admin/audit?limit=10").json()["items"]
    mine = [a for a in audit if a["details"].get("job_id") == job_id]
    assert [a["action"] for a in mine] == ["dead_letter.requeue"] * 2
    assert all(a["actor"] == f"operator:{token_digest(OPERATOR_TOKEN)[:12]}" for a in mine)
    assert all(a["at"] for a in mine) and OPERATOR_TOKEN not in str(audit)


def test_bulk_requeue_needs_a_limit(operator: Client) -> None:
    response = operator.bearer("POST", "/admin/dead-letters/requeue", {"reason": "x"})
    assert response.status_code == 422


def test_discard_needs_a_note_and_is_audited(operator: Client, dead_job) -> None:
    job_id, _ = dead_job
    [letter, *_] = operator.bearer("GET", f"/admin/dead-letters?job_id={job_id}").json()["items"]
    path = f"/admin/dead-letters/{letter['id']}/discard"
    assert operator.bearer("POST", path, {}).status_code == 422
    assert operator.bearer("POST", path, {"note": "  "}).status_code == 422
    done = operator.bearer("POST", path, {"note": "vendor withdrew the claim"})
    assert done.json() == {"discarded": 1}
    assert operator.bearer("POST", path, {"note": "twice"}).status_code == 409
    shown = operator.bearer("GET", f"/admin/dead-letters/{letter['id']}").json()
    assert (shown["status"], shown["note"]) == ("discarded", "vendor withdrew the claim")
    [entry] = [
        a
        for a in operator.bearer("GET", "/admin/audit").json()["items"]
        if a["target"] == f"dead_letter:{letter['id']}"
    ]
    assert entry["action"] == "dead_letter.discard"
    assert entry["details"] == {"note": "vendor withdrew the claim"}
    requeue = operator.bearer("POST", f"/admin/dead-letters/{letter['id']}/requeue")
    assert requeue.status_code == 409


def test_requeue_with_the_broker_down_is_503_and_stays_dead(
    backend_env: ServiceEnv, dead_job, ctx: WorkerContext
) -> None:
    job_id, vendor = dead_job
    publish_promo_contracts(ctx.engine, [vendor])
    settings = backend_env.settings(broker_url="amqp://guest:guest@127.0.0.1:1/")
    with TestClient(create_app(settings)) as http:
        operator = Client("http://testserver", token=OPERATOR_TOKEN, http=http)
        [letter, *_] = operator.bearer("GET", f"/admin/dead-letters?job_id={job_id}").json()[
            "items"
        ]
        response = operator.bearer("POST", f"/admin/dead-letters/{letter['id']}/requeue")
        assert response.status_code == 503
        shown = operator.bearer("GET", f"/admin/dead-letters/{letter['id']}").json()
    assert (shown["status"], shown["requeues"]) == ("dead", 0)


@pytest.mark.regression
def test_a_contract_publication_is_audited_once(operator: Client) -> None:
    vendor = uid("AUDIT-")
    path = f"/v1/contracts/promo_accrual/{vendor}/1"
    assert operator.bearer("PUT", path, promo_contract()).status_code == 201
    # An identical republish changes nothing (200), so it writes no entry;
    # different content is refused (409) and writes none either.
    assert operator.bearer("PUT", path, promo_contract()).status_code == 200
    assert operator.bearer("PUT", path, {**promo_contract(), "tolerance": "9"}).status_code == 409
    entries = [
        a
        for a in operator.bearer("GET", "/admin/audit?limit=100").json()["items"]
        if a["target"] == f"contract:promo_accrual/{vendor}/1"
    ]
    assert len(entries) == 1, entries
    [entry] = entries
    assert entry["action"] == "contract.publish"
    assert entry["actor"] == f"operator:{token_digest(OPERATOR_TOKEN)[:12]}"
    assert {k: entry["details"][k] for k in ("kind", "partition_key", "version")} == {
        "kind": "promo_accrual",
        "partition_key": vendor,
        "version": 1,
    }
    assert len(entry["details"]["body_sha256"]) == 64
