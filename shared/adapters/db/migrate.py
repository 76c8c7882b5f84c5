"""Apply the Alembic migrations and make sure the internal signing key exists."""

from __future__ import annotations

import secrets
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, select, text

from shared.adapters.db import tables
from shared.logs import mask

MIGRATIONS = Path(__file__).parent / "migrations"
INTERNAL_KEY = "internal_signing_key"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # versions/ holds a folder for each fifteen migrations (0001_0015, 0016_0030,
    # ...), so that no folder holds more than fifteen modules.
    config.set_main_option("recursive_version_locations", "true")
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, first_period: str | None = None) -> None:
    """Migrate to the latest schema. ``first_period``: the first booking
    period's name, if this migration makes it (else the current UTC month)."""
    config = alembic_config(url)
    config.attributes["first_period"] = first_period
    command.upgrade(config, "head")


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
        raise RuntimeError("no internal signing key: run `settleq migrate` first")
    mask(str(value))  # whichever process holds the key never logs it
    return str(value).encode()
