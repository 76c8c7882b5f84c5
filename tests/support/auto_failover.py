"""A pg_auto_failover formation of the test's own on a :class:`Topology`: a
monitor and two PostgreSQL nodes, each node in the namespace the test gives it
(a "host"), the second a synchronous streaming standby of the first
(``pg_autoctl create postgres`` runs ``initdb``, then ``pg_basebackup``).

pg_autoctl runs as the postgres user (it refuses root), its configuration and
state under the formation's own directory (``XDG_*``), and everything goes at
the end, whatever happened. Its timeouts are tuned below pg_auto_failover's
defaults (docs/operations.md#when-the-primary-is-gone says why each is safe).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.netns import Namespace, Topology
from tests.support.service_host import _pg_bin

DATABASE = "settleq"
MONITOR_PORT = 5440
# The monitor's health checks, tuned as docs/operations.md#when-the-primary-is-gone
# gives them: a node is unhealthy 8 s after its last report (default 20 s), and
# a standby takes writes 15 s after that (default 30 s), once the old primary,
# cut off, has demoted itself (its keeper: 10 s without the monitor or the
# standby, default 20 s): 10 s < 8 s + 15 s, with time to spare.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "2000",
    "pgautofailover.health_check_timeout": "2000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "1000",
    "pgautofailover.node_considered_unhealthy_timeout": "8000",
    "pgautofailover.primary_demote_timeout": "15000",
}
KEEPER_SETTINGS = {"timeout.network_partition_timeout": "10"}
WRITABLE = ("primary", "wait_primary")


@dataclass
class Node:
    name: str
    host: Namespace
    port: int
    data: Path
    keeper: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host.address}:{self.port}"


@dataclass
class Formation:
    topology: Topology
    root: Path
    monitor_host: Namespace
    nodes: dict[str, Node] = field(default_factory=dict)
    monitor: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """SETTLEQ_DATABASE_URL: both nodes, the one that takes writes chosen at
        each connect (docs/operations.md#connections-and-names)."""
        hosts = "&".join(f"host={node.address}" for node in self.nodes.values())
        return f"postgresql://postgres@/{DATABASE}?{hosts}&target_session_attrs=read-write"

    def node_url(self, node: Node) -> str:
        """One node's database alone: a cut-off primary not yet demoted still
        takes writes, and the formation's URL may choose it."""
        return f"postgresql://postgres@{node.address}/{DATABASE}"

    @property
    def monitor_uri(self) -> str:
        address = self.monitor_host.address
        return f"postgres://autoctl_node@{address}:{MONITOR_PORT}/pg_auto_failover?sslmode=disable"

    def _argv(self, *args: str) -> list[str]:
        """pg_autoctl ARGS as postgres, with this formation's configuration."""
        env = [
            f"XDG_CONFIG_HOME={self.root / 'config'}",
            f"XDG_DATA_HOME={self.root / 'share'}",
            f"PATH={Path(_pg_bin('pg_ctl')).parent}:/usr/bin:/bin",
        ]
        return ["runuser", "-u", "postgres", "--", "env", *env, "pg_autoctl", *args]

    def _run(self, host: Namespace, *args: str, timeout: float = 180) -> str:
        done = self.topology.run(host, self._argv(*args), timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args[:2])}: {done.stderr or done.stdout}")
        return done.stdout

    def _keeper(self, host: Namespace, data: Path, name: str) -> subprocess.Popen[bytes]:
        argv = self._argv("run", "--pgdata", str(data))
        return self.topology.run_in(host, argv, log_name=f"pgaf-{name}")

    def _trust_the_bridge(self, data: Path) -> None:
        # The hosts connect over the bridge: settleq's processes, and the nodes'
        # replication. pg_autoctl's own rules name only the formation's nodes.
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.topology.cidr} trust\n")
            hba.write(f"host replication all {self.topology.cidr} trust\n")

    def monitor_sql(self, sql: str) -> str:
        argv = ["psql", "-h", self.monitor_host.address, "-p", str(MONITOR_PORT)]
        argv += ["-U", "postgres", "-d", "pg_auto_failover", "-Atc", sql]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"monitor: {done.stderr.strip()}")
        return done.stdout

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's reported and assigned state, as the monitor has them."""
        rows = self.monitor_sql(
            "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node"
        )
        found = (line.split("|") for line in rows.splitlines() if line)
        return {name: (reported, goal) for name, reported, goal in found}

    def primary(self) -> Node | None:
        """The node that takes writes now, settled in that state."""
        for name, (reported, goal) in self.states().items():
            if reported == goal and reported in WRITABLE:
                return self.nodes[name]
        return None

    def wait(self, wanted: dict[str, str], timeout: float = 180) -> None:
        """Until each named node reports (and is assigned) its wanted state."""
        deadline = time.monotonic() + timeout
        states: dict[str, tuple[str, str]] = {}
        while True:
            with contextlib.suppress(RuntimeError):
                states = self.states()
                if all(states.get(n) == (s, s) for n, s in wanted.items()):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the formation never reached {wanted}: {states}")
            time.sleep(0.2)

    def start_monitor(self) -> None:
        data = self.root / "monitor"
        self._run(
            self.monitor_host,
            *("create", "monitor", "--pgdata", str(data), "--pgport", str(MONITOR_PORT)),
            *("--hostname", self.monitor_host.address, "--auth", "trust", "--no-ssl"),
        )
        self._trust_the_bridge(data)
        self.monitor = self._keeper(self.monitor_host, data, "monitor")
        deadline = time.monotonic() + 60
        while True:
            try:
                for setting, value in MONITOR_SETTINGS.items():
                    self.monitor_sql(f"ALTER SYSTEM SET {setting} = '{value}'")
                self.monitor_sql("SELECT pg_reload_conf()")
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def add_node(self, name: str, host: Namespace, port: int) -> Node:
        """Create the node (the first a primary, the next its standby) and start
        its keeper; returns once the monitor has it in its first steady state."""
        node = Node(name, host, port, self.root / name)
        self._run(
            host,
            *("create", "postgres", "--pgdata", str(node.data), "--pgport", str(port)),
            *("--pgctl", _pg_bin("pg_ctl"), "--hostname", host.address, "--name", name),
            *("--monitor", self.monitor_uri, "--dbname", DATABASE),
            *("--auth", "trust", "--no-ssl"),
        )
        self._trust_the_bridge(node.data)
        for setting, value in KEEPER_SETTINGS.items():
            self._run(host, "config", "set", "--pgdata", str(node.data), setting, value)
        self.nodes[name] = node
        self.start_keeper(node)
        self.wait({name: "secondary" if len(self.nodes) > 1 else "single"})
        return node

    def start_keeper(self, node: Node) -> None:
        node.keeper = self._keeper(node.host, node.data, node.name)

    def kill(self, node: Node) -> None:
        """The node's host dies: its keeper and its postmaster SIGKILLed at once
        (the keeper alone would restart a postmaster that died: that is a
        restart, not a failover). Its backends see the postmaster go and exit."""
        postmaster = _postmaster_pid(node.data)
        if node.keeper is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.keeper.pid, signal.SIGKILL)
            node.keeper.wait(timeout=30)
            node.keeper = None
        if postmaster is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(postmaster, signal.SIGKILL)

    def stop(self) -> None:
        for node in self.nodes.values():
            self.kill(node)
        if self.monitor is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.monitor.pid, signal.SIGKILL)
            self.monitor.wait(timeout=30)
        pid = _postmaster_pid(self.root / "monitor")
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _postmaster_pid(data: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data / "postmaster.pid").read_text().splitlines()[0])
    return None


@contextlib.contextmanager
def formation(
    topology: Topology, monitor_host: Namespace, hosts: list[tuple[Namespace, int]]
) -> Iterator[Formation]:
    """The monitor on ``monitor_host``, then a node on each (host, port): the
    first the primary, the second its synchronous standby."""
    if shutil.which("pg_autoctl") is None:
        raise RuntimeError(
            "pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)"
        )
    root = Path(tempfile.mkdtemp(prefix=f"settleq-net-{topology.prefix}-pgaf-"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    made = Formation(topology, root, monitor_host)
    try:
        made.start_monitor()
        for number, (host, port) in enumerate(hosts):
            made.add_node("abcdefgh"[number], host, port)
        made.wait({"a": "primary", "b": "secondary"})
        yield made
    finally:
        made.stop()
        shutil.rmtree(root, ignore_errors=True)
