"""A partition's ERP counterparty (docs/api.md#a-partitions-erp-counterparty):
the id its vendor, carrier or recipe has in the ERP the journal is imported
into. An operator puts it (audited); a partition without one has none."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select, update

from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.operators import audit
from shared.adapters.db.periods.tables import partition_profiles as pp
from shared.adapters.db.types import utc


@dataclass(frozen=True)
class PartitionProfile:
    partition_key: str
    erp_counterparty: str | None
    updated_at: dt.datetime
    updated_by: str


def put(
    engine: Engine, partition_key: str, erp_counterparty: str | None, actor: str, now: dt.datetime
) -> bool:
    """Create or replace a partition's profile; whether it was new."""
    values = {"erp_counterparty": erp_counterparty, "updated_at": now, "updated_by": actor}
    with engine.begin() as conn:
        # Inserted unless there is one (two first PUTs at once: one inserts,
        # the other replaces), then replaced.
        inserted = insert_ignoring_conflicts(conn, pp).values(partition_key=partition_key, **values)
        created = conn.execute(inserted.returning(pp.c.partition_key)).first() is not None
        if not created:
            conn.execute(update(pp).where(pp.c.partition_key == partition_key).values(**values))
        details = {"erp_counterparty": erp_counterparty, "created": created}
        audit.record(conn, actor, "partition.put", partition_key, details)
    return created


def get(engine: Engine, partition_key: str) -> PartitionProfile | None:
    with engine.connect() as conn:
        row = conn.execute(select(pp).where(pp.c.partition_key == partition_key)).first()
    if row is None:
        return None
    return PartitionProfile(
        row.partition_key, row.erp_counterparty, utc(row.updated_at), row.updated_by
    )


def named(conn: Connection, partition_keys: set[str] | None) -> dict[str, str]:
    """The counterparties of those of ``partition_keys`` (None: every
    partition) that have one."""
    found = conn.execute(
        select(pp.c.partition_key, pp.c.erp_counterparty).where(pp.c.erp_counterparty.is_not(None))
    )
    return {k: name for k, name in found if partition_keys is None or k in partition_keys}
