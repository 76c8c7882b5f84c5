"""Engine factory: PostgreSQL in production, a SQLite file for one machine."""

from __future__ import annotations

import os
import socket
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc

from shared.adapters.db.types import sqlite_cmp_abs_diff, sqlite_sub

# A peer gone without a word (a host cut off mid-transaction, docs/operations.md#ghost-locks)
# is given up within 20 s, and with its session go every lock and uncommitted
# row it held (the booking lock, lineage locks, a unit's marker), rather than
# after TCP's default two hours (a silent connection) or fifteen minutes (data
# it never acknowledged): keepalives probe a silent connection after 5 s, every
# 2 s, 3 times (11 s), and TCP_USER_TIMEOUT ends one whose sent data stays
# unacknowledged for 20 s (the server's end) or 10 s (the client's). The
# server's end frees what a cut-off client held. The client's end frees a
# process whose primary was cut off while it sent (a COPY, a query, the pool's
# pre-ping: keepalives never probe a connection with data in flight), so that
# it fails over to the promoted standby instead of hanging until the link comes
# back (docs/operations.md#when-the-primary-is-gone). A server that is merely
# busy (a COPY waiting on a lock, its receive window full) still acknowledges
# the window probes, and is not cut (measured: docs/operations.md#ghost-locks).
CLIENT_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10000,
}
SERVER_KEEPALIVES = (
    "tcp_keepalives_idle=5",
    "tcp_keepalives_interval=2",
    "tcp_keepalives_count=3",
    "tcp_user_timeout=20000",
)


def takes_writes(engine: Engine) -> bool:
    """Whether a new connection reaches a server that takes writes now: a
    primary (with several hosts in the URL, whichever one is; a standby, or one
    being promoted, is read-only)."""
    if engine.dialect.name != "postgresql":
        return True  # a file: there is no other host to wait for
    try:
        with engine.connect() as conn:
            return bool(conn.exec_driver_sql("SHOW transaction_read_only").scalar_one() == "off")
    except exc.DBAPIError:
        return False
    except exc.SQLAlchemyError:  # the pool busy, not the server gone
        return True


def normalize_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def make_engine(
    url: str, pool_size: int = 5, durable_commits: bool = True, component: str = "settleq"
) -> Engine:
    """``durable_commits=False``: PostgreSQL's ``synchronous_commit = off`` on
    every connection, a commit not waiting for its WAL's flush; only for a
    process whose every write may be lost in a crash's last milliseconds
    without harm (the webhooks component's bookkeeping: what it forgets it
    sends again, and at-least-once allows that). ``component`` names the
    process's PostgreSQL sessions (``application_name``, see ``session_name``)."""
    url = normalize_url(url)
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    connect_args: dict[str, Any] = {"connect_timeout": 5}
    settings = [*SERVER_KEEPALIVES, *(() if durable_commits else ("synchronous_commit=off",))]
    ours = " ".join(f"-c {setting}" for setting in settings)
    engine = create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=10,
        connect_args=connect_args,
    )

    @event.listens_for(engine, "do_connect")
    def _name(_dialect: Any, _record: Any, _args: Any, params: dict[str, Any]) -> None:
        # At each connect, not once: a process forked after the engine was made
        # (a worker's children) names its own pid. A *fallback*, so an operator's
        # PGAPPNAME or an application_name in the URL still wins.
        params.setdefault("fallback_application_name", session_name(component))
        # Defaults: the URL's own (``?tcp_user_timeout=60000``) win.
        for key, value in CLIENT_KEEPALIVES.items():
            params.setdefault(key, value)
        # After an operator's own options (the URL's ?options=), which it keeps.
        params["options"] = f"{params['options']} {ours}" if params.get("options") else ours

    return engine


def session_name(component: str) -> str:
    """What a process's PostgreSQL sessions are called, so that an operator
    (pg_stat_activity) and a close waiting on one (409 ``close_waiting``) can
    tell whose they are: ``settleq-worker@host:pid``. PostgreSQL keeps 63 bytes
    of it, so a long host name is cut, never the pid."""
    where = f":{os.getpid()}"
    name = f"{component}@{socket.gethostname()}"
    return name[: 63 - len(where)] + where


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy issue BEGIN itself (IMMEDIATE: take the write lock up
        # front so concurrent writers wait instead of failing on upgrade).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()
        # Exact money arithmetic in SQL (the dispute queue: variance filters, deltas).
        dbapi_connection.create_function(
            "settleq_cmp_abs_diff", 3, sqlite_cmp_abs_diff, deterministic=True
        )
        dbapi_connection.create_function("settleq_sub", 2, sqlite_sub, deterministic=True)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
