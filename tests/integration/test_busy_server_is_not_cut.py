"""The client's TCP_USER_TIMEOUT (shared/adapters/db/engine.py) cuts a
connection whose peer is gone, never one whose server is merely busy: a COPY
whose backend waits on a lock stops reading, the server's receive window
fills, and its kernel still answers the client's window probes. A COPY held
by a lock for three times the timeout completes (docs/operations.md#ghost-locks).
"""

from __future__ import annotations

import threading
import time
import uuid

import psycopg

from shared.adapters.db.engine import CLIENT_KEEPALIVES
from tests.support.infra import ServiceEnv

TIMEOUT_MS = 2000


def test_a_copy_held_by_a_lock_past_the_timeout_is_not_cut(test_env: ServiceEnv) -> None:
    dsn = test_env.database_url.replace("postgresql+psycopg://", "postgresql://")
    table = f"busy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {table} (a text)")
    try:
        locker = psycopg.connect(dsn)
        locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        released = threading.Event()

        def release_once_waited_on() -> None:
            # Once the COPY's backend waits on the lock, three timeouts more.
            with psycopg.connect(dsn, autocommit=True) as watcher:
                while not watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE %s",
                    (f"COPY {table}%",),
                ).fetchone()[0]:  # type: ignore[index]
                    time.sleep(0.05)
            time.sleep(3 * TIMEOUT_MS / 1000)
            locker.rollback()
            released.set()

        threading.Thread(target=release_once_waited_on, daemon=True).start()
        options = {**CLIENT_KEEPALIVES, "tcp_user_timeout": TIMEOUT_MS}
        with psycopg.connect(dsn, **options) as conn:  # type: ignore[arg-type]
            row = b"x" * 200 + b"\n"  # 40 MB: far past both ends' socket buffers
            with conn.cursor() as cur, cur.copy(f"COPY {table} (a) FROM STDIN") as copy:
                for _ in range(200_000):
                    copy.write(row)
            conn.commit()
        assert released.is_set()  # it completed only after the lock was let go
        locker.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {table}")
