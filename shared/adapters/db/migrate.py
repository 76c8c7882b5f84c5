"""Apply the Alembic migrations and make sure the internal signing key exists;
read the key (``InternalKey``: once, when first needed)."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, inspect, select, text
from sqlalchemy.exc import SQLAlchemyError

from shared.adapters.db import tables
from shared.domain.period_dates import Calendar
from shared.logs import mask

MIGRATIONS = Path(__file__).parent / "migrations"
INTERNAL_KEY = "internal_signing_key"
log = logging.getLogger("settleq.db")


class NoInternalKey(RuntimeError):
    """The database holds no internal signing key: it was never migrated."""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # versions/ holds a folder for each fifteen migrations (0001_0015, 0016_0030,
    # ...), so that no folder holds more than fifteen modules.
    config.set_main_option("recursive_version_locations", "true")
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(
    url: str,
    first_period: str | None = None,
    calendar: Calendar | None = None,
    currency: str | None = None,
) -> None:
    """Migrate to the latest schema. ``first_period``: the first booking
    period's name, if this migration makes it (else the current UTC month).
    With a ``calendar`` (dated periods), a ledger made by this migration gets
    the calendar's current period as its first, dated; one migrated before
    keeps the mode its open period has. ``currency``: that of contracts
    published before they named one (USD)."""
    config = alembic_config(url)
    config.attributes["first_period"] = first_period
    config.attributes["currency"] = currency
    if calendar is not None and _never_migrated(url):
        first = calendar.containing(dt.datetime.now(dt.UTC))
        config.attributes["first_period"] = first.name
        config.attributes["dated_first"] = first
    command.upgrade(config, "head")


def _never_migrated(url: str) -> bool:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return not inspect(conn).has_table("alembic_version")
    finally:
        engine.dispose()


def unmigrated(engine: Engine, url: str) -> str | None:
    """Why this database cannot serve the stack yet (not at the latest
    migration), or None. Raises SQLAlchemy's errors when it cannot be reached."""
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    with engine.connect() as conn:
        # Read directly: alembic's MigrationContext logs two info lines per look.
        current = None
        if inspect(conn).has_table("alembic_version"):
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    if current == head:
        return None
    at = f"is at migration {current}" if current else "has never been migrated"
    return f"the database {at}, the code needs {head}: run `settleq migrate`"


def ensure_internal_key(engine: Engine) -> None:
    """Generate the chunk-signing key once, at migrate time (docs/operations.md#credentials)."""
    with engine.begin() as conn:
        found = conn.execute(
            select(tables.meta.c.value).where(tables.meta.c.key == INTERNAL_KEY)
        ).first()
        if found is None:
            conn.execute(tables.meta.insert().values(key=INTERNAL_KEY, value=secrets.token_hex(32)))


def load_internal_key(engine: Engine, configured: str | None) -> bytes:
    if configured:
        mask(configured)
        return configured.encode()
    with engine.connect() as conn:
        value = conn.execute(
            select(tables.meta.c.value).where(tables.meta.c.key == INTERNAL_KEY)
        ).scalar_one_or_none()
    if value is None:
        raise NoInternalKey("no internal signing key: run `settleq migrate` first")
    mask(str(value))  # whichever process holds the key never logs it
    return str(value).encode()


class InternalKey:
    """The internal signing key of a process, read from the database the first
    time it is asked for and kept (it never changes): so a process starts while
    the database is down or not migrated yet. Until it is read, ``get`` raises
    what reading it raised (SQLAlchemy's error, ``NoInternalKey``): the API
    answers 503; a worker ``wait``s before it consumes anything."""

    def __init__(self, engine: Engine, configured: str | None) -> None:
        self.engine = engine
        self.configured = configured
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def get(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = load_internal_key(self.engine, self.configured)
            return self._key

    def wait(self, stop: threading.Event, first_s: float = 0.5, longest_s: float = 5.0) -> bool:
        """Until the key is read (True), asking again with a growing pause while
        the database cannot be reached or is not migrated; False when ``stop``
        is set first. Says so in one line when it starts waiting and in another
        when it is done: a database that starts after the process is no fault."""
        pause, said = first_s, None
        while not stop.is_set():
            try:
                self.get()
            except (SQLAlchemyError, NoInternalKey) as exc:
                # The driver's first line names the host and database, never a password.
                why = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
                if why != said:
                    log.warning("the database is not ready (%s): waiting for it", why)
                    said = why
                stop.wait(pause)
                pause = min(pause * 2, longest_s)
                continue
            if said is not None:
                log.info("the database is ready")
            return True
        return False
