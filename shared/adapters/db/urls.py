"""What a ledger URL may be: the databases the ledger runs on and the drivers
settleq installs for them (engine.py opens them). Read by the settings, so that
a URL no engine could open is a configuration error at start, not a driver's
traceback; it imports nothing heavy for that reason."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# "" is the database's own default driver (psycopg for postgresql: engine.py).
LEDGER_DRIVERS = {"postgresql": ("", "psycopg"), "postgres": ("",), "sqlite": ("", "pysqlite")}
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")


def database_url_problem(url: str) -> str | None:
    """What makes ``url`` no ledger URL, or None; never quoting it (it may hold
    a password)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return "has no scheme (postgresql:// or sqlite:///)"
    dialect, _, driver = scheme.partition("+")  # as SQLAlchemy reads it: lower case
    drivers = LEDGER_DRIVERS.get(dialect)
    if drivers is None:
        return f"names {dialect}: the ledger is PostgreSQL (postgresql://) or SQLite (sqlite:///)"
    if driver not in drivers:
        return f"names the driver {driver}, which settleq does not install: write {dialect}://"
    if dialect == "sqlite":
        # sqlite:///relative.db, sqlite:////absolute.db, or sqlite:// (in memory)
        return None if rest == "" or rest.startswith("/") else "names no file: sqlite:///path.db"
    netloc = urlsplit(url).netloc
    if "," in netloc.rpartition("@")[2]:
        # libpq's host list (h1:5432,h2:5432) is no URL SQLAlchemy reads.
        return (
            "names several hosts in libpq's form: write each as a host parameter,"
            " postgresql://user@/db?host=h1:5432&host=h2:5432&target_session_attrs=read-write"
        )
    try:
        urlsplit(url).port  # noqa: B018 - reading the host and port is the check
    except ValueError:
        return "is no URL: its host or port cannot be read"
    return None
