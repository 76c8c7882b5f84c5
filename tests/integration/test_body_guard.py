"""Bodies are read only after authentication, and never above 1 MiB (docs/api.md#bodies-and-roles).

Driven at the ASGI level with a ``receive`` that counts the bytes the app
pulls: "not read" is then a number, not a guess from memory use.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.api.intake.body_guard import BODY_LIMIT
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

MiB = 1 << 20
PART = 64 * 1024
BODY_ENDPOINTS = [
    ("POST", "/admin/dead-letters/requeue"),
    ("POST", "/admin/dead-letters/1/discard"),
    ("PUT", "/v1/contracts/promo_accrual/VENDOR-GUARD/1"),
]


@pytest.fixture(scope="module")
def app(test_env: ServiceEnv) -> Iterator[FastAPI]:
    with TestClient(create_app(test_env.settings())) as client:  # runs the lifespan
        yield client.app  # type: ignore[misc]


class Sent:
    """One request sent as ``size`` bytes in 64 KiB parts, counting what the app pulls."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.pulled = 0

    async def receive(self) -> dict[str, Any]:
        if self.left <= 0:
            return {"type": "http.request", "body": b"", "more_body": False}
        part = b"x" * min(PART, self.left)
        self.left -= len(part)
        self.pulled += len(part)
        return {"type": "http.request", "body": part, "more_body": self.left > 0}


def call(
    app: FastAPI, method: str, path: str, size: int, *, token: str | None, chunked: bool | None
) -> tuple[int, bytes, int]:
    """(status, body, bytes of the request body the app pulled)."""
    headers = [(b"content-type", b"application/json")]
    if chunked is not None:  # None: a body its headers do not announce (HTTP/2 may send one)
        headers.append(
            (b"transfer-encoding", b"chunked") if chunked else (b"content-length", b"%d" % size)
        )
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
        "state": {},
    }
    sent = Sent(size)
    answer: dict[str, Any] = {"body": b""}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    anyio.run(app, scope, sent.receive, send)
    return answer["status"], answer["body"], sent.pulled


@pytest.mark.regression
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_a_tokenless_100_mib_body_is_refused_unread(
    app: FastAPI, method: str, path: str, chunked: bool
) -> None:
    for token, code in [(None, b"token_missing"), ("not-a-token-at-all", b"invalid_token")]:
        status, body, pulled = call(app, method, path, 100 * MiB, token=token, chunked=chunked)
        assert (status, pulled) == (401, 0), body
        assert b'"code":"' + code + b'"' in body


@pytest.mark.regression
@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_an_operator_body_above_1_mib_is_413(app: FastAPI, method: str, path: str) -> None:
    status, body, pulled = call(app, method, path, 2 * MiB, token=OPERATOR_TOKEN, chunked=False)
    assert (status, pulled) == (413, 0), body
    assert b'"code":"payload_too_large"' in body
    # Streamed without a length: cut off once past the limit, not read to the end.
    status, body, pulled = call(app, method, path, 100 * MiB, token=OPERATOR_TOKEN, chunked=True)
    assert status == 413 and b'"code":"payload_too_large"' in body
    assert pulled <= BODY_LIMIT + PART


@pytest.mark.regression
@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_a_viewer_body_to_an_operator_write_is_403_unread(
    app: FastAPI, method: str, path: str
) -> None:
    # Before: the body was parsed first, so a viewer's bad JSON was a 422.
    status, body, pulled = call(app, method, path, 512, token=VIEWER_TOKEN, chunked=False)
    assert (status, pulled) == (403, 0), body
    assert b'"code":"forbidden"' in body


def test_an_operator_body_within_the_limit_reaches_the_route(app: FastAPI) -> None:
    client = TestClient(app)
    response = client.post(
        "/admin/dead-letters/requeue",
        content=b'{"limit": 1, "job_id": "no-such-job"}' + b" " * (BODY_LIMIT - 100),
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}", "Content-Type": "application/json"},
    )
    assert response.status_code == 200 and response.json()["requeued"] == 0


def test_body_less_requests_and_the_front_door_are_untouched(app: FastAPI) -> None:
    client = TestClient(app)
    assert client.get("/healthz").status_code == 200
    assert client.get("/admin/audit").status_code == 401
    # The front door keeps its own, larger limit and its signature check.
    status, body, _ = call(app, "POST", "/v1/batches", 2 * MiB, token=None, chunked=False)
    assert status == 401 and b"signature_missing" in body


def test_another_method_on_the_front_door_is_405_unread(app: FastAPI) -> None:
    status, _, pulled = call(app, "PUT", "/v1/batches", 100 * MiB, token=None, chunked=True)
    assert (status, pulled) == (405, 0)


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
def test_an_unannounced_body_meets_the_same_checks(app: FastAPI, method: str, path: str) -> None:
    status, body, pulled = call(app, method, path, 100 * MiB, token=None, chunked=None)
    assert status == 401 and b"token_missing" in body and pulled <= PART
    status, body, pulled = call(app, method, path, 100 * MiB, token=OPERATOR_TOKEN, chunked=None)
    assert status == 413 and b"payload_too_large" in body and pulled <= BODY_LIMIT + PART
