"""Contract versions: immutable once published (docs/architecture.md#version-pinning)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Engine, func, literal, select, tuple_

from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.ledger.priors import lock_partition_for_repricing
from shared.adapters.db.operators import audit
from shared.adapters.db.tables import contracts
from shared.domain.money import DEFAULT_CURRENCY


class CurrencyChanged(Exception):
    """A new version names another currency than the partition's versions
    (409 ``contract_currency_changed``): a re-pricing's delta would subtract
    an amount in one currency from an amount in another."""


class ContractConflict(Exception):
    """A different body is already published under this version; ``next_version``
    is the partition's first version not published yet (its newest + 1)."""

    def __init__(self, message: str, next_version: int) -> None:
        super().__init__(message)
        self.next_version = next_version


def canonical_body(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Published:
    """A version as ``put_contract`` left it: what a read of it returns."""

    result: Literal["created", "unchanged"]
    body: dict[str, Any]  # as stored: the canonical text's object
    created_at: dt.datetime  # the stored version's: the first publication's
    currency: str  # the stored version's: its body's, or the default at its publication


def put_contract(
    engine: Engine,
    kind: str,
    partition_key: str,
    version: int,
    body: dict[str, Any],
    *,
    actor: str | None = None,
    currency: str = DEFAULT_CURRENCY,
) -> Published:
    """Publish a version once, and return it as stored, read in the same
    transaction (no second one to read it back). With ``actor`` (an operator
    publishing over the API) a publication is audited in the same transaction:
    no contract without its audit entry. An identical republish writes nothing,
    so it is not audited. ``currency``: the version's if its body names none
    (SETTLEQ_CURRENCY). Raises ``ContractConflict``, ``CurrencyChanged``."""
    text = canonical_body(body)
    named = body.get("currency") or currency
    digest = hashlib.sha256(text.encode()).hexdigest()
    with engine.begin() as conn:
        if version > 1:
            lock_partition_for_repricing(conn, kind, partition_key)
        row = {
            "kind": kind,
            "partition_key": partition_key,
            "version": version,
            "body": text,
            "body_sha256": digest,
            "created_at": dt.datetime.now(dt.UTC),
            "currency": named,
        }
        # Inserted only if no other version is in another currency: one
        # statement, as a publication always was.
        other_currency = (
            select(contracts.c.currency)
            .where(
                contracts.c.kind == kind,
                contracts.c.partition_key == partition_key,
                contracts.c.version != version,
                contracts.c.currency != named,
            )
            .exists()
        )
        values = select(*(literal(v, contracts.c[k].type) for k, v in row.items())).where(
            ~other_currency
        )
        created: dt.datetime | None = conn.execute(
            insert_ignoring_conflicts(conn, contracts)
            .from_select(list(row), values)
            .returning(contracts.c.created_at)
        ).scalar()
        if created is not None:
            if actor is not None:
                audit.record(
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
            return Published("created", json.loads(text), created, named)
        existing = conn.execute(
            select(contracts.c.body_sha256, contracts.c.created_at, contracts.c.currency).where(
                contracts.c.kind == kind,
                contracts.c.partition_key == partition_key,
                contracts.c.version == version,
            )
        ).first()
        if existing is None:
            was = conn.execute(
                select(contracts.c.currency).where(
                    contracts.c.kind == kind, contracts.c.partition_key == partition_key
                )
            ).scalar()
            raise CurrencyChanged(
                f"{kind}/{partition_key}'s contract is in {was}: version {version} cannot be"
                f" in {named} (a re-pricing would subtract one currency from another);"
                " money in another currency is another partition's"
            )
        if existing.body_sha256 == digest:
            # The same digest: the stored text is this one.
            return Published("unchanged", json.loads(text), existing.created_at, existing.currency)
        newest: int = conn.execute(
            select(func.max(contracts.c.version)).where(
                contracts.c.kind == kind, contracts.c.partition_key == partition_key
            )
        ).scalar_one()
    raise ContractConflict(
        f"{kind}/{partition_key}/{version} is published with other content", newest + 1
    )


def get_contract(
    engine: Engine, kind: str, partition_key: str, version: int
) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(contracts.c.body, contracts.c.created_at, contracts.c.currency).where(
                contracts.c.kind == kind,
                contracts.c.partition_key == partition_key,
                contracts.c.version == version,
            )
        ).first()
    if row is None:
        return None
    return {"body": json.loads(row.body), "created_at": row.created_at, "currency": row.currency}


def list_versions(engine: Engine, kind: str, partition_key: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(contracts.c.version, contracts.c.body_sha256, contracts.c.created_at)
            .where(contracts.c.kind == kind, contracts.c.partition_key == partition_key)
            .order_by(contracts.c.version)
        ).all()
    return [dict(r._mapping) for r in rows]


@dataclass(frozen=True)
class Position:
    """The last contract a page of ``list_contracts`` showed. Its partition is
    named by a digest: a cursor is short, a partition up to 128 characters."""

    created_at: dt.datetime
    kind: str
    version: int
    partition_digest: str


class UnknownPosition(LookupError):
    """A position that names no published contract (a cursor not issued here)."""


def partition_digest(partition_key: str) -> str:
    return hashlib.sha256(partition_key.encode()).hexdigest()[:16]


def list_contracts(
    engine: Engine,
    *,
    kind: str | None,
    partition_key: str | None,
    after: Position | None,
    limit: int,
) -> list[dict[str, Any]]:
    """Published versions, oldest first (then by kind, partition and version), at
    most ``limit``, after ``after``. Oldest first: a version published while a
    client pages comes last, so paging never skips one. Raises ``UnknownPosition``."""
    c = contracts.c
    where = [c.kind == kind] if kind is not None else []
    if partition_key is not None:
        where.append(c.partition_key == partition_key)
    columns = (c.kind, c.partition_key, c.version, c.body_sha256, c.created_at)
    order = (c.created_at, c.kind, c.partition_key, c.version)
    found: list[Any] = []
    with engine.connect() as conn:
        if after is not None:
            # The versions published at that very instant (one, nearly always), in
            # the page's order: the page goes on after the one the position names.
            ties = conn.execute(
                select(*columns).where(*where, c.created_at == after.created_at).order_by(*order)
            ).all()
            named = (after.kind, after.version, after.partition_digest)
            seen = [(r.kind, r.version, partition_digest(r.partition_key)) for r in ties]
            if named not in seen:
                raise UnknownPosition(named)
            found = list(ties[seen.index(named) + 1 :][:limit])
            where.append(c.created_at > after.created_at)
        if len(found) < limit:
            rest = select(*columns).where(*where).order_by(*order).limit(limit - len(found))
            found += conn.execute(rest).all()
    return [dict(r._mapping) for r in found]


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
