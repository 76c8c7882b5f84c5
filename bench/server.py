"""The PostgreSQL server a benchmark runs on (``--postgres``).

- ``tuned`` (the default): a cluster of the bench's own, durable (fsync and
  synchronous commit on, autovacuum on: PostgreSQL's defaults), started with
  the server settings of ``docker/compose.yaml``'s PostgreSQL command, the ones
  a deployment of settleq runs with;
- ``stock``: the same cluster with PostgreSQL's own defaults;
- ``both``: ``stock``, then ``tuned``, compared: what those settings buy;
- ``machine``: the machine's server on 127.0.0.1:5432, as it is configured.

The cluster's data directory is under ``TMPDIR`` and removed at the end.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psycopg
import yaml

from tests.support.infra import PG_ADMIN
from tests.support.private_services import PrivatePostgres

SERVERS = ("tuned", "stock", "both", "machine")
COMPOSE = Path(__file__).resolve().parents[1] / "docker" / "compose.yaml"
# What the report shows of the server: the settings that decide the ledger's write path.
SHOWN = (
    "shared_buffers",
    "max_wal_size",
    "checkpoint_timeout",
    "wal_compression",
    "fsync",
    "synchronous_commit",
    "autovacuum",
)


# Compose's interpolation of a variable with a default: ${NAME:-default}.
_VARIABLE = re.compile(r"\$\{([A-Z_][A-Z0-9_]*):-([^}]*)\}")


def production_settings(
    compose: Path = COMPOSE, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The ``-c name=value`` settings of the compose file's PostgreSQL command,
    its variables resolved as compose resolves them (from ``environ``, else
    their defaults)."""
    command = yaml.safe_load(compose.read_text())["services"]["postgres"]["command"]
    settings: dict[str, str] = {}
    for flag, setting in zip(command[1::2], command[2::2], strict=True):
        if flag != "-c":
            raise ValueError(f"{compose}: the postgres command takes -c name=value, not {flag}")
        name, value = setting.split("=", 1)
        settings[name] = _VARIABLE.sub(lambda m: environ.get(m[1]) or m[2], value)
    return settings


def servers(choice: str) -> list[str]:
    """The servers ``--postgres choice`` runs on, in order."""
    return ["stock", "tuned"] if choice == "both" else [choice]


@contextmanager
def server(kind: str) -> Iterator[str]:
    """The admin URL of a server of ``kind`` for the time of the block."""
    if kind == "machine":
        yield PG_ADMIN
        return
    cluster = PrivatePostgres(production_settings() if kind == "tuned" else {}, durable=True)
    try:
        cluster.init()
        cluster.wait_ready()
        yield cluster.admin_url
    finally:
        cluster.destroy()


def describe(kind: str, admin: str) -> str:
    """One line: which server, and its settings that matter here."""
    with psycopg.connect(admin) as conn:
        shown = ", ".join(
            f"{name}={conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
            for name in SHOWN
        )
    where = "the machine's server" if kind == "machine" else f"a private cluster ({kind})"
    return f"PostgreSQL: {where}: {shown}"
