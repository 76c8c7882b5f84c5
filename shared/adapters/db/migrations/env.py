"""Alembic environment: the URL comes from the caller (``settleq migrate``)."""

from __future__ import annotations

from alembic import context

from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import metadata

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "settleq migrate sets sqlalchemy.url"

if context.is_offline_mode():
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=metadata,
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:  # a migration that raises (one refusing to go down) leaves no connection behind
        engine.dispose()
