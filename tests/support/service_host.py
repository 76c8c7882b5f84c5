"""The services "machine" of a :class:`~tests.support.netns.Topology`: a
three-node RabbitMQ cluster (scripts/rabbitmq-cluster), a Redis and a PostgreSQL,
all of this run's own, listening on the services namespace's address only.

Worker-host namespaces reach them over the bridge, as settleq's workers on other
machines would; the machine's own RabbitMQ, Redis and PostgreSQL (127.0.0.1 in
the root namespace) are never involved. Everything stops at the end, and
whatever still runs in the namespace goes with it at the topology's teardown.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.netns import Namespace, Topology

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = ROOT / "scripts" / "rabbitmq-cluster"
RABBITMQCTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
CLUSTER_PREFIX = "sqc"  # node names sqc1@localhost..sqc3@localhost, inside the namespace
AMQP_BASE_PORT = 5681
REDIS_PORT = 6379
PG_PORT = 5432
DATABASE = "settleq"


def _pg_bin(name: str) -> str:
    """Debian keeps initdb and pg_ctl off PATH, in a versioned directory."""
    for directory in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (directory / name).exists():
            return str(directory / name)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed")
    return found


def _as_postgres(argv: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass(frozen=True)
class ServiceHost:
    """What runs in the services namespace, and how to reach and drive it."""

    topology: Topology
    namespace: Namespace
    address: str
    broker_url: str  # SETTLEQ_BROKER_URL: the three nodes' URLs, ';'-separated
    broker_urls: tuple[str, ...]
    redis_url: str  # SETTLEQ_REDIS_URL
    database_url: str  # SETTLEQ_DATABASE_URL (settleq adds the +psycopg driver itself)
    cluster_dir: Path  # scripts/rabbitmq-cluster --dir
    cluster_home: Path  # HOME holding the cluster's .erlang.cookie
    node_names: tuple[str, ...]
    pg_data: Path

    def settleq_env(self) -> dict[str, str]:
        """The SETTLEQ_* settings of a settleq process on a worker host."""
        return {
            "SETTLEQ_BROKER_URL": self.broker_url,
            "SETTLEQ_REDIS_URL": self.redis_url,
            "SETTLEQ_DATABASE_URL": self.database_url,
        }

    def cluster(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """scripts/rabbitmq-cluster ARGS in the services namespace, e.g.
        ``cluster("stop-node", "2")``, ``cluster("kill-node", "3")``."""
        argv = [str(CLUSTER_SCRIPT), "--dir", str(self.cluster_dir), *args]
        return self.topology.run(self.namespace, argv, timeout=timeout)

    def rabbitmqctl(self, node: int, *args: str, timeout: float = 60) -> str:
        """rabbitmqctl ARGS against node 1-3, with the cluster's cookie; its stdout."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.cluster_home),  # its .erlang.cookie, not the system node's
            # Not /etc/rabbitmq/rabbitmq-env.conf (the system node's settings).
            "RABBITMQ_CONF_ENV_FILE": str(self.cluster_dir / "node1" / "rabbitmq-env.conf"),
        }
        argv = [RABBITMQCTL, "-n", self.node_names[node - 1], *args]
        done = self.topology.run(self.namespace, argv, env=env, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr or done.stdout}")
        return done.stdout


def _check(done: subprocess.CompletedProcess[str], what: str) -> str:
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr or done.stdout}")
    return done.stdout


def _start_postgres(topology: Topology, root: Path) -> tuple[Path, str]:
    """initdb, trust for the bridge's subnet, pg_ctl start on the services address."""
    svc, data, sockets = topology.services, root / "data", root / "sockets"
    sockets.mkdir(parents=True)
    if os.geteuid() == 0:
        for path in (root, sockets):
            shutil.chown(path, "postgres", "postgres")
    initdb = [_pg_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]
    _check(topology.run(svc, _as_postgres(initdb), timeout=120), "initdb")
    # Worker hosts connect over TCP from the bridge's /24; initdb trusts loopback only.
    with open(data / "pg_hba.conf", "a") as hba:
        hba.write(f"host all all {topology.cidr} trust\n")
    options = f"-c listen_addresses={svc.address} -p {PG_PORT} -k {sockets} -c fsync=on"
    pg_ctl = [_pg_bin("pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w"]
    _check(topology.run(svc, _as_postgres([*pg_ctl, "-t", "60", "-o", options, "start"])), "pg_ctl")
    psql = ["psql", "-h", str(sockets), "-p", str(PG_PORT), "-U", "postgres"]
    create = _as_postgres([*psql, "-c", f"CREATE DATABASE {DATABASE}"])
    _check(topology.run(svc, create), "CREATE DATABASE")
    return data, f"postgresql://postgres@{svc.address}:{PG_PORT}/{DATABASE}"


def _start_redis(topology: Topology, root: Path) -> tuple[str, subprocess.Popen[bytes]]:
    svc = topology.services
    root.mkdir()
    server = ["redis-server", "--bind", svc.address, "--port", str(REDIS_PORT), "--save", ""]
    server += ["--appendonly", "no", "--protected-mode", "no", "--dir", str(root)]
    process = topology.run_in(svc, server, log_name="redis")
    deadline = time.monotonic() + 20
    ping = ["redis-cli", "-h", svc.address, "-p", str(REDIS_PORT), "ping"]
    while topology.run(svc, ping, timeout=10).stdout.strip() != "PONG":
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis-server in {svc.name} did not start")
        time.sleep(0.1)
    return f"redis://{svc.address}:{REDIS_PORT}/0", process


@contextmanager
def service_host(topology: Topology) -> Iterator[ServiceHost]:
    """Start the services in ``topology.services``; stop them all at the end."""
    svc = topology.services
    # The name `sweep` recognises as this run's (settleq-net-sq<pid>-...).
    root = Path(tempfile.mkdtemp(prefix=f"settleq-net-{topology.prefix}-svc-"))
    root.chmod(0o755)  # postgres traverses it to its data directory
    cluster_dir = root / "rabbitmq"
    start = [str(CLUSTER_SCRIPT), "--dir", str(cluster_dir), "--bind", svc.address]
    start += ["--base-port", str(AMQP_BASE_PORT), "--prefix", CLUSTER_PREFIX, "start"]
    pg_data: Path | None = None
    redis: subprocess.Popen[bytes] | None = None
    # The cluster takes the longest: PostgreSQL and Redis start while it boots.
    booting = topology.run_in(svc, start, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pg_data, database_url = _start_postgres(topology, root / "pg")
        redis_url, redis = _start_redis(topology, root / "redis")
        out, err = booting.communicate(timeout=240)
        if booting.returncode != 0:
            raise RuntimeError(f"rabbitmq-cluster start failed: {err.decode(errors='replace')}")
        # "3 nodes running in N s": in the test's captured output (shown on failure, or -s).
        print(err.decode(errors="replace").strip(), file=sys.stderr)
        broker_url = out.decode().strip().splitlines()[-1]
        yield ServiceHost(
            topology=topology,
            namespace=svc,
            address=svc.address,
            broker_url=broker_url,
            broker_urls=tuple(broker_url.split(";")),
            redis_url=redis_url,
            database_url=database_url,
            cluster_dir=cluster_dir,
            cluster_home=cluster_dir / "home",
            node_names=tuple(f"{CLUSTER_PREFIX}{n}@localhost" for n in (1, 2, 3)),
            pg_data=pg_data,
        )
    finally:
        if booting.returncode is None:  # start failed elsewhere: no stop races the boot
            with contextlib.suppress(ProcessLookupError):
                os.killpg(booting.pid, signal.SIGKILL)
            booting.communicate()
        _stop(topology, cluster_dir, pg_data, redis)
        shutil.rmtree(root, ignore_errors=True)


def _stop(
    topology: Topology,
    cluster_dir: Path,
    pg_data: Path | None,
    redis: subprocess.Popen[bytes] | None,
) -> None:
    """Each stop on its own: one that fails does not keep the others running (and
    the topology's teardown kills whatever is left in the namespace)."""
    svc = topology.services
    if redis is not None and redis.poll() is None:
        redis.terminate()  # nothing on disk to lose: --save "" --appendonly no
        with contextlib.suppress(subprocess.TimeoutExpired):
            redis.wait(timeout=10)
    with contextlib.suppress(Exception):
        if (cluster_dir / "cluster.env").exists():
            topology.run(svc, [str(CLUSTER_SCRIPT), "--dir", str(cluster_dir), "stop"], timeout=90)
    with contextlib.suppress(Exception):
        if pg_data is not None and (pg_data / "postmaster.pid").exists():
            stop = [_pg_bin("pg_ctl"), "-D", str(pg_data), "-m", "immediate", "-w", "stop"]
            topology.run(svc, _as_postgres(stop), timeout=60)
