"""An interrupted ``make test`` left databases, queues and exchanges behind
(issue 42, item 19): the next run removes what a dead run made, and never
what a live run (this one, another checkout's) uses."""

from __future__ import annotations

import subprocess
import sys

import pika
import psycopg
import pytest

from tests.support.infra import BROKER_URL, PG_ADMIN, drop_database, new_prefix, sweep_leftovers

pytestmark = pytest.mark.regression


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid  # gone, and not reused within this test


def make_objects(prefix: str) -> list[str]:
    database = f"settleq_test_z_{prefix[1:]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        channel = connection.channel()
        channel.queue_declare(queue=f"{prefix}.fast_path", durable=True)
        channel.exchange_declare(exchange=f"{prefix}.events", exchange_type="topic", durable=True)
    finally:
        connection.close()
    return [f"database {database}", f"queue {prefix}.fast_path", f"exchange {prefix}.events"]


def test_what_a_dead_run_left_is_removed_and_a_live_runs_is_kept() -> None:
    dead = f"t{dead_pid():x}z{new_prefix()[-8:]}"
    live = new_prefix()  # this process's: alive
    left = make_objects(dead)
    mine = make_objects(live)
    try:
        removed = sweep_leftovers()
        assert set(left) <= set(removed)
        assert not set(mine) & set(removed)
    finally:
        drop_database(f"settleq_test_z_{live[1:]}")
        drop_database(f"settleq_test_z_{dead[1:]}")
        connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        try:
            for prefix in (live, dead):
                channel = connection.channel()
                channel.queue_delete(queue=f"{prefix}.fast_path")
                channel.exchange_delete(exchange=f"{prefix}.events")
        finally:
            connection.close()
