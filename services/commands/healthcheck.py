"""The compose api's health probe: ``python -m services.commands.healthcheck``.

The API is "healthy" only when it answers /healthz *and* can do its job: at
least one producer key is configured or active in the database (otherwise
every POST /v1/batches is 401)
and the ledger holds at least one contract (otherwise every line is
dead-lettered unknown_contract). Each failure is one line naming the fix
(docs/operations.md#docker-compose); the exit code is 1.
"""

from __future__ import annotations

import sys
import urllib.request

from sqlalchemy import func, select

from shared.adapters.db.engine import make_engine
from shared.adapters.db.operators.producer_keys import ACTIVE
from shared.adapters.db.tables import contracts, producer_keys
from shared.config.settings import Settings

NO_KEYS = (
    "no producer keys: every POST /v1/batches will be 401; create one with "
    "`settleq keys create` (with --env: for SETTLEQ_PRODUCER_KEYS)"
)
NO_CONTRACTS = (
    "no contracts in the ledger: every line would be dead-lettered unknown_contract; "
    "publish one with `settleq contracts put` (or PUT /v1/contracts/{kind}/{partition}/{version})"
)


def problem(settings: Settings, url: str = "http://127.0.0.1:8000/healthz") -> str | None:
    """What keeps the API from being healthy, or None."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except OSError as exc:
        return f"the API does not answer {url} ({type(exc).__name__})"
    engine = make_engine(settings.database_url, pool_size=1, component="settleq-healthcheck")
    try:
        with engine.connect() as conn:
            keys = (
                len(settings.producer_keys)
                or conn.execute(
                    select(func.count())
                    .select_from(producer_keys)
                    .where(producer_keys.c.status == ACTIVE)
                ).scalar_one()
            )
            if not keys:
                return NO_KEYS
            count = conn.execute(select(func.count()).select_from(contracts)).scalar_one()
    except Exception as exc:  # a probe reports, never raises
        return f"the ledger cannot be read ({type(exc).__name__}): check SETTLEQ_DATABASE_URL"
    finally:
        engine.dispose()
    return None if count else NO_CONTRACTS


def main() -> int:
    try:
        found = problem(Settings())
    except Exception as exc:  # a configuration error: its type, never a value
        found = f"configuration error ({type(exc).__name__}): `settleq api` names the variable"
    if found:
        print(f"unhealthy: {found}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
