"""Reads from a replica (docs/operations.md#reads-from-a-replica), against a
real streaming standby whose replay is paused (``pg_wal_replay_pause()``):
the ledger feed never skips or repeats a row (it is the primary's), a period
closed after the pause is read from the primary (the replica does not have
its close), and one closed before it is served by the replica with the same
bytes its close hashed, even with the primary gone.

PostgreSQL clusters of the test's own (``initdb``, ``pg_basebackup``): run as
root, as CI runs, which starts them as the postgres user.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, text

from services.api.app import create_app
from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.periods.tables import periods
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv, migrate
from tests.support.periods import settle_promo
from tests.support.replica import primary_and_standby

pytestmark = pytest.mark.timeout(300)

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def replayed_up_to_now(primary: Engine, standby: Engine) -> None:
    """Until the standby has replayed everything the primary has written."""
    with primary.connect() as conn:
        lsn = conn.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one()
    deadline = time.monotonic() + 60
    while True:
        with standby.connect() as conn:
            behind = conn.execute(
                text("SELECT pg_wal_lsn_diff(CAST(:lsn AS pg_lsn), pg_last_wal_replay_lsn())"),
                {"lsn": lsn},
            ).scalar_one()
        if behind <= 0:
            return
        assert time.monotonic() < deadline, f"the standby is {behind} bytes behind"
        time.sleep(0.1)


def close(http: TestClient, period: str, next_name: str) -> None:
    body = {"period": period, "next": next_name, "note": "month end"}
    answer = http.post("/admin/periods/close", json=body, headers=OPERATOR)
    assert answer.status_code == 200, answer.text


def feed(http: TestClient) -> list[int]:
    """Every row the feed gives, from its start, page by page."""
    ids: list[int] = []
    cursor: str | None = None
    while True:
        query: dict[str, Any] = {"limit": 7} | ({"after": cursor} if cursor else {})
        page = http.get("/v1/ledger/feed", params=query, headers=VIEWER).json()
        if not page["items"]:
            return ids
        ids += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]


def journal_csv(http: TestClient, period: str) -> bytes:
    answer = http.get(f"/v1/periods/{period}/journal", params={"format": "csv"}, headers=VIEWER)
    assert answer.status_code == 200, answer.text
    return answer.content


def job_lines(http: TestClient, job_id: str) -> bytes:
    answer = http.get(f"/v1/jobs/{job_id}/lines.csv", headers=VIEWER)
    assert answer.status_code == 200, answer.text
    return answer.content


def test_a_lagging_replica_never_skips_repeats_or_disagrees(test_env: ServiceEnv) -> None:
    with primary_and_standby() as pair:
        migrate(pair.primary_url)
        primary, standby = make_engine(pair.primary_url), make_engine(pair.standby_url)
        settings = test_env.settings(
            database_url=pair.primary_url, read_database_url=pair.standby_url
        )
        vendor = uid("V-R")

        def settle(n: int) -> str:
            docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")]) for _ in range(n)]
            return settle_promo(primary, docs)

        try:
            with TestClient(create_app(settings)) as http:
                [first] = [
                    p["name"]
                    for p in http.get("/v1/periods", headers=VIEWER).json()["items"]
                    if p["status"] == "open"
                ]
                early_job = settle(3)
                close(http, first, "R-2")
                replayed_up_to_now(primary, standby)
                with standby.connect() as conn:
                    conn.execute(text("SELECT pg_wal_replay_pause()"))
                late_job = settle(4)
                close(http, "R-2", "R-3")
                settle(2)

                # The feed is the primary's: every row once, none skipped.
                with primary.connect() as conn:
                    ledger = conn.execute(select(tables.ledger_entries.c.id)).scalars().all()
                    hashed = {r.name: r.journal_sha256 for r in conn.execute(select(periods))}
                fed = feed(http)
                assert len(fed) == len(set(fed)) == len(ledger) == 9
                assert set(fed) == set(ledger)

                # R-2 closed after the pause: the replica does not show it closed,
                # so its journal is the primary's, the bytes its close hashed.
                with standby.connect() as conn:
                    seen = conn.execute(
                        select(periods.c.status).where(periods.c.name == "R-2")
                    ).scalar()
                assert seen == "open"
                assert hashlib.sha256(journal_csv(http, "R-2")).hexdigest() == hashed["R-2"]

                # The first period closed before it: the replica serves it, even
                # with the primary gone.
                served = journal_csv(http, first)
                assert hashlib.sha256(served).hexdigest() == hashed[first]
                # A job completed after the pause: its lines are the primary's
                # (the replica does not have it); one completed before it, the
                # replica's too.
                assert len(job_lines(http, late_job).splitlines()) == 1 + 4
                early_lines = job_lines(http, early_job)
                assert len(early_lines.splitlines()) == 1 + 3
                pair.stop_primary()
                assert journal_csv(http, first) == served
                assert job_lines(http, early_job) == early_lines
        finally:
            primary.dispose()
            standby.dispose()


def test_one_url_of_both_hosts_reaches_the_standby_once_promoted() -> None:
    """SETTLEQ_DATABASE_URL may name several hosts, ``target_session_attrs=
    read-write`` choosing the one that takes writes at each connect: the same
    engine settles on the primary, then, once it is gone and the standby
    promoted, on the standby, with nothing to restart and nothing lost or
    doubled of what the standby had replayed."""
    with primary_and_standby() as pair:
        migrate(pair.primary_url)
        engine = make_engine(pair.both_url)
        standby = make_engine(pair.standby_url)
        vendor = uid("V-F")
        try:
            before = [promo_doc(vendor, [promo_line(n, "8", "1.00")]) for n in (1, 2)]
            settle_promo(engine, before)
            replayed_up_to_now(engine, standby)
            pair.stop_primary()
            pair.promote_standby()
            settle_promo(engine, [promo_doc(vendor, [promo_line(1, "16", "2.00")])])
            with engine.connect() as conn:
                where = conn.execute(text("SELECT inet_server_port()")).scalar_one()
                rows = (
                    conn.execute(
                        select(tables.ledger_entries.c.reconciliation_key).where(
                            tables.ledger_entries.c.partition_key == vendor
                        )
                    )
                    .scalars()
                    .all()
                )
            assert where == pair.ports[1]
            assert len(rows) == len(set(rows)) == 3
        finally:
            engine.dispose()
            standby.dispose()
