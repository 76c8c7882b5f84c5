"""The keyring's re-read of the database's producer keys (about every second,
in whichever request finds them stale) never runs on the API's event loop
(services/api/auth.py, docs/api.md#producer-keys): while that read waits, on
a lock here, every other request is still answered, a signed one too.

PostgreSQL only: the read is made to wait on a table lock held from outside.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from services.api.app import create_app
from services.commands.client import Client
from shared.adapters.db.engine import make_engine
from tests.support.infra import PRODUCER_ID, PRODUCER_SECRET, VIEWER_TOKEN, ServiceEnv

# Generous bounds for a loaded machine: a request the loop is free to answer
# takes milliseconds; one behind a blocked loop waits until the lock goes.
ANSWERED_WITHIN_S = 30.0
READY_WITHIN_S = 60.0
SIGNED_PATH = "/v1/webhook-endpoints"  # its producer check runs on the loop (async)


@pytest.fixture
def outside(test_env: ServiceEnv) -> Iterator[Engine]:
    """Connections of another process's making: one holds the lock, one watches."""
    engine = make_engine(test_env.database_url)
    yield engine
    engine.dispose()


def reads_waiting_on_the_keys(engine: Engine) -> int:
    """Statements of this database waiting on a lock to read producer_keys
    (each poll its own transaction: pg_stat_activity is a snapshot per one)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query ILIKE '%producer_keys%'"
    )
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


@pytest.mark.regression
def test_a_slow_read_of_the_producer_keys_stalls_no_other_request(
    test_env: ServiceEnv, outside: Engine
) -> None:
    """Issue 52 item 13: the re-read ran on the event loop, so a producer_keys
    table held locked (a migration, an operator's long transaction) stopped
    every request of the process, health checks too, until it was released."""
    with TestClient(create_app(test_env.settings())) as http:
        producer = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        viewer = Client("http://testserver", token=VIEWER_TOKEN, http=http)
        assert producer.signed("GET", SIGNED_PATH).status_code == 200  # the keys read once
        with outside.connect() as locker, ThreadPoolExecutor(4) as pool:
            locking = locker.begin()
            try:
                locker.execute(text("LOCK TABLE producer_keys IN ACCESS EXCLUSIVE MODE"))
                http.app.state.ctx.keys.expire()  # the next check re-reads them
                stalled = pool.submit(producer.signed, "GET", SIGNED_PATH)
                deadline = time.monotonic() + READY_WITHIN_S
                while not reads_waiting_on_the_keys(outside):
                    assert time.monotonic() < deadline, "the keys' re-read never started"
                    time.sleep(0.05)
                others = [
                    pool.submit(http.get, "/healthz"),
                    pool.submit(viewer.bearer, "GET", "/v1/jobs?limit=1"),
                    # Signed too: it goes on with the keys read a moment ago.
                    pool.submit(producer.signed, "GET", SIGNED_PATH),
                ]
                answered, _ = wait(others, timeout=ANSWERED_WITHIN_S)
                assert not stalled.done()  # still waiting: the read was slow throughout
            finally:
                locking.rollback()
        assert [f.result().status_code for f in others if f in answered] == [200, 200, 200]
        assert stalled.result(timeout=READY_WITHIN_S).status_code == 200
