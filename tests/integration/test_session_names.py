"""Every settleq process names its PostgreSQL sessions (``application_name``),
so an operator reading pg_stat_activity, and a close that gives up waiting on
one (409 close_waiting), can tell whose a session is: the component, its host
and its pid. An operator's own PGAPPNAME still wins."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any

from shared.adapters.db.engine import make_engine, session_name


def _own_name(url: str, component: str) -> str:
    engine = make_engine(url, pool_size=1, component=component)
    try:
        with engine.connect() as conn:
            return str(conn.exec_driver_sql("SHOW application_name").scalar_one())
    finally:
        engine.dispose()


def test_a_session_is_named_by_its_component_host_and_pid(test_env: Any) -> None:
    named = _own_name(test_env.database_url, "settleq-worker")
    host = socket.gethostname()[:30]
    assert named.startswith(f"settleq-worker@{host}") and named.endswith(f":{os.getpid()}")


def test_pgappname_wins_over_the_name_settleq_gives(test_env: Any) -> None:
    script = (
        "import sys; from tests.integration.test_session_names import _own_name;"
        "print(_own_name(sys.argv[1], 'settleq-api'))"
    )
    env = {**os.environ, "PGAPPNAME": "erp-night-run"}
    done = subprocess.run(
        [sys.executable, "-c", script, test_env.database_url],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.strip() == "erp-night-run"


def test_a_long_host_name_is_cut_never_the_pid() -> None:
    name = session_name("settleq-webhooks" + "x" * 80)
    assert len(name.encode()) <= 63 and name.endswith(f":{os.getpid()}")
