"""Trading-partner profiles (docs/api.md#trading-partners): an operator's
``put`` (audited in its transaction), and reads by sender."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, select, update

from shared.adapters.db.dead_letters import audit
from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.edi.tables import edi_partners
from shared.domain.partners import Acknowledge

p = edi_partners


@dataclass(frozen=True)
class Partner:
    sender_qualifier: str  # ISA05
    sender_id: str  # ISA06, trimmed
    name: str
    contract_version: int
    partition_key: str | None
    period: str | None
    acknowledge: Acknowledge
    updated_at: dt.datetime | None = None


def _partner(row: Any) -> Partner:
    updated = row.updated_at
    return Partner(
        sender_qualifier=row.sender_qualifier,
        sender_id=row.sender_id,
        name=row.name,
        contract_version=row.contract_version,
        partition_key=row.partition_key,
        period=row.period,
        acknowledge=row.acknowledge,
        updated_at=updated if updated.tzinfo else updated.replace(tzinfo=dt.UTC),
    )


def put(engine: Engine, partner: Partner, actor: str, now: dt.datetime) -> bool:
    """Create or replace a partner's profile; whether it was new."""
    values = {k: v for k, v in asdict(partner).items() if k != "updated_at"}
    values["updated_at"] = now
    key = (p.c.sender_qualifier == partner.sender_qualifier) & (p.c.sender_id == partner.sender_id)
    with engine.begin() as conn:
        # Inserted unless there is one (two first PUTs at once: one inserts,
        # the other replaces), then replaced.
        inserted = insert_ignoring_conflicts(conn, p).values(**values).returning(p.c.sender_id)
        created = conn.execute(inserted).first() is not None
        if not created:
            conn.execute(update(p).where(key).values(**values))
        shown = {k: v for k, v in values.items() if k != "updated_at"}
        audit(
            conn,
            actor,
            "partner.put",
            f"{partner.sender_qualifier}/{partner.sender_id}",
            {**shown, "created": created},
        )
    return created


def get(engine: Engine, qualifier: str, sender_id: str) -> Partner | None:
    query = select(p).where(p.c.sender_qualifier == qualifier, p.c.sender_id == sender_id)
    with engine.connect() as conn:
        row = conn.execute(query).first()
    return None if row is None else _partner(row)


def listing(engine: Engine) -> list[Partner]:
    """Every profile, by name."""
    query = select(p).order_by(p.c.name, p.c.sender_qualifier, p.c.sender_id)
    with engine.connect() as conn:
        return [_partner(row) for row in conn.execute(query)]
