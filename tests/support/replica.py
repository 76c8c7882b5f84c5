"""A PostgreSQL primary and its streaming standby of a test's own, on free
local ports: ``initdb`` and ``pg_basebackup`` as the postgres user (they
refuse root), torn down at the end, whatever happened."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.service_host import _as_postgres, _pg_bin
from tests.support.stack import free_port

DATABASE = "settleq"


@dataclass(frozen=True)
class Pair:
    primary_url: str
    standby_url: str
    primary_data: Path
    standby_data: Path
    ports: tuple[int, int]

    @property
    def both_url(self) -> str:
        """Both hosts in one URL, the one that takes writes chosen at each connect
        (docs/operations.md#connections-and-names)."""
        hosts = "&".join(f"host=127.0.0.1:{port}" for port in self.ports)
        return f"postgresql://postgres@/{DATABASE}?{hosts}&target_session_attrs=read-write"

    def stop_primary(self) -> None:
        """The primary gone at once, as a dead host's (``-m immediate``)."""
        _pg_ctl(self.primary_data, "-m", "immediate", "stop")

    def promote_standby(self) -> None:
        _pg_ctl(self.standby_data, "promote")


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(_as_postgres(argv), capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr or done.stdout}")


def _pg_ctl(data: Path, *args: str) -> None:
    _run([_pg_bin("pg_ctl"), "-D", str(data), "-w", "-t", "60", *args], f"pg_ctl {args[-1]}")


@contextlib.contextmanager
def primary_and_standby(synchronous: bool = False) -> Iterator[Pair]:
    """``synchronous``: the primary acknowledges a commit once the standby has
    it (``synchronous_standby_names``), so a promotion loses none it answered."""
    root = Path(tempfile.mkdtemp(prefix="settleq-replica-"))
    root.chmod(0o755)  # postgres traverses it
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    primary, standby, sockets = root / "primary", root / "standby", root / "sockets"
    started: list[Path] = []
    try:
        _run(["mkdir", str(sockets)], "mkdir")
        initdb = [_pg_bin("initdb"), "-D", str(primary), "-U", "postgres", "--auth=trust"]
        _run([*initdb, "-E", "UTF8"], "initdb")
        ports = free_port(), free_port()
        for data, port in zip((primary, standby), ports, strict=True):
            if data is standby:
                # A streaming copy (-R writes its primary_conninfo and standby.signal).
                source = ["-h", "127.0.0.1", "-p", str(ports[0]), "-U", "postgres"]
                _run(
                    [
                        _pg_bin("pg_basebackup"),
                        *source,
                        "-D",
                        str(standby),
                        "-R",
                        "-X",
                        "stream",
                        "-c",
                        "fast",
                    ],
                    "pg_basebackup",
                )
            options = f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets}"
            _pg_ctl(data, "-l", str(root / f"{data.name}.log"), "-o", options, "start")
            started.append(data)
            if data is primary:
                psql = ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
                _run([*psql, "-c", f"CREATE DATABASE {DATABASE}"], "CREATE DATABASE")
        if synchronous:  # once the standby streams: before, a commit would wait for it
            psql = ["psql", "-h", "127.0.0.1", "-p", str(ports[0]), "-U", "postgres"]
            sql = "ALTER SYSTEM SET synchronous_standby_names = '*'"
            _run([*psql, "-c", sql, "-c", "SELECT pg_reload_conf()"], "synchronous_standby_names")
        urls = [f"postgresql://postgres@127.0.0.1:{port}/{DATABASE}" for port in ports]
        yield Pair(urls[0], urls[1], primary, standby, ports)
    finally:
        for data in reversed(started):
            with contextlib.suppress(Exception):
                if (data / "postmaster.pid").exists():
                    _pg_ctl(data, "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)
