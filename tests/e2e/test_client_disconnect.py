"""A client that hangs up mid-upload (Ctrl-C during a large POST) against a
real ``settleq api``: one info line, a 499 in /metrics, nothing stored, and
never a server error or a traceback in the log (issue 29, item 12)."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import func, select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.support.infra import PRODUCER_ID, VIEWER_TOKEN, isolated_env
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "logs" / "client_disconnect"


@pytest.fixture(scope="module")
def api() -> Iterator[Stack]:
    with isolated_env("cdis") as env:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        stack = Stack(env, ARTIFACTS)
        try:
            stack.start_api()
            yield stack
        finally:
            stack.stop()


def hang_up_mid_upload(url: str, sent: int = 4 << 20, declared: int = 50 << 20) -> None:
    """POST a batch that declares ``declared`` bytes, send ``sent`` of them, hang up."""
    where = urlsplit(url)
    head = (
        "POST /v1/batches HTTP/1.1\r\n"
        f"Host: {where.netloc}\r\n"
        "Content-Type: application/x-ndjson\r\n"
        f"Content-Length: {declared}\r\n"
        f"X-Key-Id: {PRODUCER_ID}\r\n"
        # Well formed and fresh: the headers pass, the MAC is judged after the body.
        f"X-Signature: t={int(time.time())},v1={'0' * 64}\r\n"
        "\r\n"
    ).encode()
    line = b'{"kind": "promo_accrual"}\n'
    with socket.create_connection((where.hostname, where.port)) as conn:
        conn.sendall(head + line + b" " * (sent - len(line)))
        time.sleep(0.5)  # the API is reading it
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    # closed with a reset, as a killed client's connection is


def batches_counted(url: str) -> dict[str, float]:
    text = httpx.get(
        f"{url}/metrics", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}, timeout=10
    ).text
    pattern = re.compile(
        r'settleq_http_request_duration_seconds_count\{method="POST",'
        r'route="/v1/batches",status="(\d+)"\} (\S+)'
    )
    return {status: float(count) for status, count in pattern.findall(text)}


@pytest.mark.regression
def test_a_client_that_hangs_up_mid_upload_is_one_info_line_and_a_499(api: Stack) -> None:
    engine = make_engine(api.env.database_url)
    try:
        with engine.connect() as conn:
            jobs_before = conn.execute(select(func.count()).select_from(tables.jobs)).scalar()
        log_before = len(api.log("api", tail=None))
        hang_up_mid_upload(api.url)
        deadline = time.monotonic() + 15
        while batches_counted(api.url).get("499") != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        counted = batches_counted(api.url)
        # Before: {"500": 1}, and "unhandled error" with two ClientDisconnect tracebacks.
        assert counted == {"499": 1}, counted
        logged = api.log("api", tail=None)[log_before:]
        assert "Traceback" not in logged and "unhandled error" not in logged, logged
        assert "ClientDisconnect" not in logged, logged
        assert len(re.findall("client closed the connection", logged)) == 1, logged
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(tables.jobs)).scalar() == (
                jobs_before
            )
        assert httpx.get(f"{api.url}/healthz", timeout=5).status_code == 200
    finally:
        engine.dispose()
