"""A PostgreSQL cluster and a Redis server of the test's own, on free ports, so
that faults which restart or flush a whole server (the chaos suite) never
touch the machine's shared instances. RabbitMQ stays the machine's broker.

Both are removed at the end: the cluster's data directory and the Redis process.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis

from tests.support.infra import ServiceEnv, check_services, delete_queues, migrate, new_prefix
from tests.support.stack import free_port


def _pg_bin(name: str) -> str:
    """A PostgreSQL server program: on PATH, else Debian's versioned directory."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for directory in versions:
        if (directory / name).exists():
            return str(directory / name)
    raise RuntimeError(f"PostgreSQL's {name} is not installed")


def _as_owner(args: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: as root, run them as ``postgres``."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


# A server setting's value as pg_ctl passes it on through a shell: one word.
_SETTING_VALUE = re.compile(r"[A-Za-z0-9._-]+")


class PrivatePostgres:
    """One throw-away cluster (``initdb`` into a temporary directory, ``pg_ctl``).

    ``durable`` keeps PostgreSQL's fsync (a benchmark's server writes as a
    production one does); tests turn it off, as a crashed server (not machine)
    loses nothing by it. ``settings`` are more server settings (``-c``)."""

    def __init__(self, settings: Mapping[str, str] | None = None, durable: bool = False) -> None:
        self.settings = dict(settings or {})
        for name, value in self.settings.items():
            if not (_SETTING_VALUE.fullmatch(name) and _SETTING_VALUE.fullmatch(value)):
                raise ValueError(f"server setting {name}={value!r}: one word each, no spaces")
        self.durable = durable
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="settleq-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.admin_url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        command = [_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", *args]
        subprocess.run(_as_owner(command), check=True, capture_output=True, timeout=timeout)

    def init(self) -> None:
        initdb = [_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust"]
        subprocess.run(_as_owner([*initdb, "-E", "UTF8"]), check=True, capture_output=True)
        settings = {
            "port": str(self.port),
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.root),
            "max_connections": "200",
            **({} if self.durable else {"fsync": "off"}),
            **self.settings,
        }
        options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        self._pg_ctl("-o", options, "start")

    def restart(self, mode: str = "fast") -> None:
        """``fast`` rolls back every open transaction and shuts down cleanly;
        ``immediate`` is a crash (recovery from the WAL at the next start)."""
        self._pg_ctl("-m", mode, "restart")

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.admin_url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._pg_ctl("-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """One ``redis-server`` that keeps nothing on disk, like the machine's."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.root = Path(tempfile.mkdtemp(prefix="settleq-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.root)]
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - the child holds it
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        """SIGTERM and wait: with no persistence every key is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class PrivateServices:
    env: ServiceEnv
    postgres: PrivatePostgres
    redis: PrivateRedis
    database: str


@contextmanager
def private_env(tag: str) -> Iterator[PrivateServices]:
    """Like ``infra.isolated_env``, on a private PostgreSQL cluster and Redis
    server (RabbitMQ: the machine's, under a queue prefix of its own)."""
    check_services()
    prefix = new_prefix()
    suffix = prefix[1:]
    postgres, server = PrivatePostgres(), PrivateRedis()
    try:
        postgres.init()
        server.start()
        database = f"settleq_test_{tag}_{suffix}"
        url = postgres.create_database(database)
        migrate(url)
        env = ServiceEnv(database_url=url, queue_prefix=prefix, overrides={"redis_url": server.url})
        yield PrivateServices(env, postgres, server, database)
    finally:
        try:
            delete_queues(prefix)
        finally:
            server.destroy()
            postgres.destroy()
