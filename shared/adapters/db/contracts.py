"""Contract versions: immutable once published (docs/architecture.md#version-pinning)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal

from sqlalchemy import Connection, Engine, select, tuple_

from shared.adapters.db.dead_letters import audit
from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.priors import lock_partition_for_repricing
from shared.adapters.db.tables import contracts


class ContractConflict(Exception):
    """A different body is already published under this version."""


def canonical_body(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def put_contract(
    engine: Engine,
    kind: str,
    partition_key: str,
    version: int,
    body: dict[str, Any],
    *,
    actor: str | None = None,
) -> Literal["created", "unchanged"]:
    """Publish a version once. With ``actor`` (an operator publishing over the
    API) a publication is audited in the same transaction: no contract without
    its audit entry. An identical republish writes nothing, so it is not audited."""
    text = canonical_body(body)
    digest = hashlib.sha256(text.encode()).hexdigest()
    with engine.begin() as conn:
        if version > 1:
            lock_partition_for_repricing(conn, kind, partition_key)
        inserted = conn.execute(
            insert_ignoring_conflicts(conn, contracts)
            .values(
                kind=kind,
                partition_key=partition_key,
                version=version,
                body=text,
                body_sha256=digest,
                created_at=dt.datetime.now(dt.UTC),
            )
            .returning(contracts.c.version)
        ).first()
        if inserted is not None:
            if actor is not None:
                audit(
                    conn,
                    actor,
                    "contract.publish",
                    f"contract:{kind}/{partition_key}/{version}",
                    {
                        "kind": kind,
                        "partition_key": partition_key,
                        "version": version,
                        "body_sha256": digest,
                    },
                )
            return "created"
        existing: str = conn.execute(
            select(contracts.c.body_sha256).where(
                contracts.c.kind == kind,
                contracts.c.partition_key == partition_key,
                contracts.c.version == version,
            )
        ).scalar_one()
    if existing != digest:
        raise ContractConflict(f"{kind}/{partition_key}/{version} is published with other content")
    return "unchanged"


def get_contract(
    engine: Engine, kind: str, partition_key: str, version: int
) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(contracts.c.body, contracts.c.created_at).where(
                contracts.c.kind == kind,
                contracts.c.partition_key == partition_key,
                contracts.c.version == version,
            )
        ).first()
    if row is None:
        return None
    return {"body": json.loads(row.body), "created_at": row.created_at}


def list_versions(engine: Engine, kind: str, partition_key: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(contracts.c.version, contracts.c.body_sha256, contracts.c.created_at)
            .where(contracts.c.kind == kind, contracts.c.partition_key == partition_key)
            .order_by(contracts.c.version)
        ).all()
    return [dict(r._mapping) for r in rows]


def load_bodies(
    conn: Connection, kind: str, wanted: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], dict[str, Any]]:
    """Bodies of the (partition_key, version) pairs that exist, in one query."""
    pairs = sorted(set(wanted))
    if not pairs:
        return {}
    rows = conn.execute(
        select(contracts.c.partition_key, contracts.c.version, contracts.c.body).where(
            contracts.c.kind == kind,
            tuple_(contracts.c.partition_key, contracts.c.version).in_(pairs),
        )
    ).all()
    return {(r.partition_key, r.version): json.loads(r.body) for r in rows}
