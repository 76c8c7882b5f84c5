"""Fault injectors of the chaos suite, each one named for the fault it injects.

The PostgreSQL and Redis faults act on the chaos stack's private servers
(tests/support/private_services.py), never on the machine's shared ones;
the RabbitMQ restart is the machine's broker (``stop_app``/``start_app``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.support.infra import BROKER_URL
from tests.support.private_services import PrivateServices
from tests.support.stack import Stack

# A compute_heavy worker's broker connection beats every HEARTBEAT_S seconds:
# RabbitMQ closes it (and requeues the chunks it held) about two missed beats
# after the process stops. That is how a paused worker's chunk reaches another.
HEARTBEAT_S = 2
_broker = urlsplit(BROKER_URL)
HEAVY_BROKER_URL = urlunsplit(
    _broker._replace(query="&".join(filter(None, [_broker.query, f"heartbeat={HEARTBEAT_S}"])))
)
# The longest wait for RabbitMQ to drop a stopped worker's connection, and the
# shortest pause (the chaos stack's claim lease is 2 s).
PAUSE_S = 4 * HEARTBEAT_S + 2
MIN_PAUSE_S = 3 * HEARTBEAT_S

CLASSES = (
    "worker_sigkill",
    "rabbitmq_restart",
    "redis_flushall",
    "postgres_refuses",
    "relay_kill",
    "sigstop_past_lease",
    "postgres_restart",
    "redis_restart",
    "postgres_crash",
)


def rabbitmq_restart() -> None:
    subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True, timeout=120)
    time.sleep(1)
    subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True, timeout=120)
    subprocess.run(["rabbitmqctl", "-q", "await_startup"], check=True, timeout=120)


def postgres_refuses(admin_url: str, database: str, seconds: float) -> None:
    """New connections are refused and live ones are cut, for a few seconds."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )
            time.sleep(seconds)
        finally:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


def wait_for_open_write(admin_url: str, database: str, timeout: float = 3) -> bool:
    """Wait until a transaction of the stack is open and has written (a settle or
    relay commit in flight); False if none was seen in ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin_url, autocommit=True) as admin:
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                " AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()",
                (database,),
            ).fetchone()
            if row and row[0]:
                return True
            time.sleep(0.005)
    return False


def broker_sockets(pid: int) -> dict[str, str]:
    """The TCP state of each connection of this process to RabbitMQ, by local port."""
    port = urlsplit(BROKER_URL).port or 5672
    out = subprocess.run(
        ["ss", "-tanpH", "dport", "=", f":{port}"], capture_output=True, text=True, check=True
    ).stdout
    found = {}
    for line in out.splitlines():
        if f"pid={pid}," in line:
            state, _, _, local = line.split()[:4]
            found[local.rsplit(":", 1)[1]] = state
    return found


# How long a (re)started worker may take to connect to RabbitMQ.
WORKER_CONNECT_S = 60.0

# What a relay logs once its start-up checks passed, and how long it may take.
RELAY_STARTED = "relay publishing to"
RELAY_START_S = 60.0


def broker_dropped(pid: int, timeout: float) -> bool:
    """Wait until RabbitMQ has closed a connection of this (stopped) process: it
    resets a connection that missed its heartbeats, so the socket leaves ESTAB."""
    before = [p for p, state in broker_sockets(pid).items() if state == "ESTAB"]
    deadline = time.monotonic() + timeout
    while before and time.monotonic() < deadline:
        now = broker_sockets(pid)
        if any(now.get(p) != "ESTAB" for p in before):
            return True
        time.sleep(0.2)
    return False


class Chaos:
    """Injects named faults into a running stack and counts them."""

    def __init__(self, stack: Stack, services: PrivateServices, rng: random.Random) -> None:
        self.stack = stack
        self.services = services
        self.rng = rng
        self.injected: Counter[str] = Counter()
        # Faults that struck work in flight: a PostgreSQL restart while a write
        # transaction was open; a paused worker whose broker connection was dropped.
        self.mid_work: Counter[str] = Counter()

    def workers(self, *prefixes: str) -> list[str]:
        return sorted(n for n in self.stack.processes if n.startswith(prefixes))

    def start_worker(self, name: str) -> None:
        if name.startswith("fast"):
            self.stack.start_worker("fast_path", name=name)
        else:
            self.stack.start_worker("compute_heavy", name=name, broker_url=HEAVY_BROKER_URL)

    def worker_sigkill(self) -> None:
        name = self.rng.choice(self.workers("fast", "heavy"))
        self.stack.kill(name)
        self.start_worker(name)

    def rabbitmq_restart(self) -> None:
        rabbitmq_restart()

    def redis_flushall(self) -> None:
        client = self.services.redis.client()
        client.flushall()
        client.close()

    def postgres_refuses(self) -> None:
        postgres_refuses(self.services.postgres.admin_url, self.services.database, 3)

    def relay_kill(self) -> None:
        started = self._relay_starts()
        self.stack.kill("relay")
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.stack._spawn("relay", ["relay"])
        # Up before the next fault strikes: on a slow host the new relay's
        # start-up checks met the PostgreSQL crash planned after it, so it
        # exited (as a relay that cannot reach its database at start does), and
        # no supervisor here starts it again. Faults come one at a time.
        deadline = time.monotonic() + RELAY_START_S
        while self._relay_starts() == started:
            if self.stack.processes["relay"].poll() is not None:
                raise RuntimeError(f"the relay did not start:\n{self.stack.log('relay')}")
            assert time.monotonic() < deadline, "the relay did not start in time"
            time.sleep(0.1)

    def _relay_starts(self) -> int:
        return self.stack.log("relay", tail=None).count(RELAY_STARTED)

    def sigstop_past_lease(self) -> None:
        """A compute_heavy worker stops (SIGSTOP) for longer than its claim lease
        and its broker heartbeat; the chunks it held go to the other worker;
        then it resumes (SIGCONT) in the middle of its stale attempt."""
        name = self.rng.choice(self.workers("heavy"))
        # A worker restarted by an earlier fault may not be consuming yet, or may
        # have died starting (a database fault struck its start-up): start it
        # again, as a supervisor would, and stop it once it holds a broker
        # connection, so that there is one for RabbitMQ to drop.
        deadline = time.monotonic() + WORKER_CONNECT_S
        while "ESTAB" not in broker_sockets(self.stack.processes[name].pid).values():
            assert time.monotonic() < deadline, f"{name} never connected to RabbitMQ"
            if self.stack.processes[name].poll() is not None:
                self.start_worker(name)
            time.sleep(0.1)
        pid = self.stack.processes[name].pid
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            if broker_dropped(pid, timeout=PAUSE_S):
                self.mid_work["sigstop_past_lease"] += 1
            # Then a while for the other worker to take what this one held (and
            # never less than MIN_PAUSE_S: past the claim lease in any case).
            waited = time.monotonic() - stopped
            time.sleep(max(HEARTBEAT_S, MIN_PAUSE_S - waited))
        finally:
            os.kill(pid, signal.SIGCONT)

    def _restart_postgres(self, fault: str, mode: str) -> None:
        postgres = self.services.postgres
        if wait_for_open_write(postgres.admin_url, self.services.database):
            self.mid_work[fault] += 1
        postgres.restart(mode)

    def postgres_restart(self) -> None:
        """``pg_ctl restart -m fast`` while a write transaction is open."""
        self._restart_postgres("postgres_restart", "fast")

    def postgres_crash(self) -> None:
        """``pg_ctl restart -m immediate``: a crash, recovered from the WAL."""
        self._restart_postgres("postgres_crash", "immediate")

    def redis_restart(self) -> None:
        """The Redis server stops (every lease and done mark lost) and comes back."""
        self.services.redis.stop()
        time.sleep(self.rng.uniform(0.5, 1.5))
        self.services.redis.start()

    def inject(
        self,
        plan: list[str],
        progress: Callable[[], float],
        before: Callable[[int], None] | None = None,
    ) -> list[float]:
        """Inject the faults in order (``before(i)`` first, if given); the job's
        progress when each one struck."""
        seen = []
        for i, fault in enumerate(plan):
            if before is not None:
                before(i)
            time.sleep(self.rng.uniform(0.3, 1.2))
            try:
                seen.append(progress())
            except Exception:  # the API may be mid-fault itself
                seen.append(float("nan"))
            getattr(self, fault)()
            self.injected[fault] += 1
        return seen
