"""Exactly-once resolution under races (docs/architecture.md#exactly-once-resolution):
concurrent resolutions of one dispute, a bulk resolution racing single ones
(both ledger backends), and a resolution racing a settlement of a newer
version of the same identity (PostgreSQL: SQLite runs one writer at a time)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, select, text

from shared.adapters.db.disputes import queue as disputes
from shared.adapters.db.engine import make_engine
from shared.adapters.db.tables import ledger_entries as ledger
from shared.domain.disputes import DisputeAlreadyResolved, DisputeSuperseded, ResolveRequest
from tests.support.disputes import (
    ACTOR,
    counts_for,
    delta_sums,
    disputed_doc,
    job_disputes,
    new_vendor,
    planned,
    resolutions_of,
    row,
    settle,
)
from tests.support.infra import ServiceEnv
from tests.support.ledger import commit_plan
from tests.support.races import race


@pytest.fixture(scope="module")
def wide_engine(backend_env: ServiceEnv) -> Iterator[Engine]:
    """An engine of 24 connections: every racer holds its own."""
    engine = make_engine(backend_env.database_url, pool_size=12)
    yield engine
    engine.dispose()


@pytest.mark.both_backends
def test_twenty_concurrent_resolutions_of_one_dispute_resolve_it_once(
    wide_engine: Engine,
) -> None:
    """One resolved row, one resolution record, one event, one audit entry,
    and all twenty callers answered with that same resolution."""
    vendor = new_vendor(wide_engine)
    docs = [disputed_doc(vendor, ["1.50"])]
    [dispute_id] = job_disputes(wide_engine, settle(wide_engine, docs), docs)
    request = ResolveRequest("settle_at", "agreed on the phone", Decimal("1.25"))
    results = race(
        [
            lambda n=n: disputes.resolve(wide_engine, dispute_id, request, f"operator:{n:012d}")
            for n in range(20)
        ]
    )
    assert all(isinstance(r, disputes.Resolved) for r in results), results
    assert [r.created for r in results].count(True) == 1
    assert len({r.dispute for r in results}) == 1
    assert counts_for(wide_engine, dispute_id) == (1, 1, 1, 1)


@pytest.mark.both_backends
def test_concurrent_different_resolutions_let_one_win_and_refuse_the_others(
    wide_engine: Engine,
) -> None:
    vendor = new_vendor(wide_engine)
    docs = [disputed_doc(vendor, ["1.50"])]
    [dispute_id] = job_disputes(wide_engine, settle(wide_engine, docs), docs)
    claim, model = ResolveRequest("accept_claim", "c"), ResolveRequest("accept_model", "m")
    results = race(
        [
            lambda r=r: disputes.resolve(wide_engine, dispute_id, r, ACTOR)
            for r in [claim, model] * 10
        ]
    )
    [winner] = [r for r in results if isinstance(r, disputes.Resolved) and r.created]
    assert winner.dispute.resolution is not None
    won = winner.dispute.resolution.decision
    for n, result in enumerate(results):
        asked = ("accept_claim", "accept_model")[n % 2]
        if asked == won:
            assert isinstance(result, disputes.Resolved), result
            assert result.dispute == winner.dispute
        else:
            assert isinstance(result, DisputeAlreadyResolved), result
    assert counts_for(wide_engine, dispute_id) == (1, 1, 1, 1)


@pytest.mark.both_backends
def test_a_bulk_resolution_racing_single_ones_resolves_each_dispute_once(
    wide_engine: Engine,
) -> None:
    vendor = new_vendor(wide_engine)
    docs = [disputed_doc(vendor, [f"1.{n + 10}" for n in range(10)]) for _ in range(3)]
    job_id = settle(wide_engine, docs)
    ids = job_disputes(wide_engine, job_id, docs)
    assert len(ids) == 30
    request = ResolveRequest("accept_model", "write-off")
    where = disputes.Filter(job_id=job_id)
    calls: list[Callable[[], Any]] = [
        lambda: disputes.resolve_bulk(wide_engine, where, request, 30, ACTOR),
        lambda: disputes.resolve_bulk(wide_engine, where, request, 30, ACTOR),
    ]
    calls += [
        lambda i=i: disputes.resolve(wide_engine, i, ResolveRequest("accept_claim", "s"), ACTOR)
        for i in ids[::2]
    ]
    results = race(calls)
    bulk, singles = results[:2], results[2:]
    created = [r for r in singles if isinstance(r, disputes.Resolved)]
    assert all(r.created for r in created)
    assert all(isinstance(r, disputes.Resolved | DisputeAlreadyResolved) for r in singles), singles
    assert sum(bulk) + len(created) == 30
    for dispute_id in ids:
        assert counts_for(wide_engine, dispute_id) == (1, 1, 1, 1)


def test_a_resolution_waits_for_a_newer_versions_settlement_then_finds_it_superseded(
    engine: Engine,
) -> None:
    """The resolution takes the lineage lock the settlement holds: without it,
    it would read the dispute still open and append a resolution beside the
    newer version's row, both measured from the disputed row."""
    vendor = new_vendor(engine)
    doc = disputed_doc(vendor, ["1.50"])
    [dispute_id] = job_disputes(engine, settle(engine, [doc]), [doc])
    ref, plan = planned(engine, [disputed_doc(vendor, ["1.50"], 2, doc["document_id"])])
    outcome: list[Any] = []
    with engine.begin() as conn:
        assert commit_plan(conn, ref, plan, 1) is not None  # holds the lock until commit
        accept = ResolveRequest("accept_claim", "n")
        resolving = threading.Thread(
            target=lambda: outcome.append(
                _result(lambda: disputes.resolve(engine, dispute_id, accept, ACTOR))
            )
        )
        resolving.start()
        resolving.join(timeout=1.0)
        assert resolving.is_alive(), f"the resolution did not wait: {outcome}"
    resolving.join(timeout=30)
    [result] = outcome
    assert isinstance(result, DisputeSuperseded), result
    assert counts_for(engine, dispute_id) == (0, 0, 0, 0)
    key = row(engine, dispute_id).reconciliation_key
    [(total, latest)] = delta_sums(engine, {key}).values()
    assert total == latest == Decimal("2.00")


def test_a_newer_versions_settlement_waits_for_a_resolution_in_flight(
    engine: Engine,
) -> None:
    """The settlement of version 2 waits for the resolution's lineage lock, then
    measures its delta from the amount decided: the identity adds up."""
    vendor = new_vendor(engine)
    doc = disputed_doc(vendor, ["1.50"])
    [dispute_id] = job_disputes(engine, settle(engine, [doc]), [doc])
    accept = ResolveRequest("accept_claim", "n")
    resolving = threading.Thread(target=lambda: disputes.resolve(engine, dispute_id, accept, ACTOR))
    with engine.connect() as holder:
        # The resolution's decision goes into a table this connection keeps
        # from writers: it stops there, its resolved row written, not committed.
        holder.execute(text("LOCK TABLE dispute_resolutions IN SHARE MODE"))
        me = holder.execute(text("SELECT pg_backend_pid()")).scalar_one()
        resolving.start()
        [resolver] = _blocked_by(holder, me)
        v2 = [disputed_doc(vendor, ["1.50"], 2, doc["document_id"])]
        settling = threading.Thread(target=lambda: settle(engine, v2))
        settling.start()
        waiting = _blocked_by(holder, resolver, alive=settling)
        holder.rollback()
    resolving.join(timeout=30)
    settling.join(timeout=30)
    assert waiting, "the settlement did not wait for the resolution"
    [resolved] = resolutions_of(engine, dispute_id)
    [newer] = [r for r in _identity(engine, dispute_id) if r.contract_version == 2]
    assert newer.supersedes_id == resolved.id
    assert newer.delta == Decimal("2.00") - Decimal("1.50")
    [(total, latest)] = delta_sums(engine, {resolved.reconciliation_key}).values()
    assert total == latest == Decimal("2.00")


def _blocked_by(
    watch: Connection, pid: int, alive: threading.Thread | None = None, timeout: float = 30
) -> list[int]:
    """The backends waiting on a lock backend ``pid`` holds, once there is one;
    none if ``alive`` ends first (it did not wait)."""
    blocked = text("SELECT pid FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))")
    deadline = time.monotonic() + timeout
    while True:
        watch.execute(text("SELECT pg_stat_clear_snapshot()"))  # read once a transaction
        if found := list(watch.execute(blocked, {"pid": pid}).scalars()):
            return found
        if alive is not None and not alive.is_alive():
            return []
        assert time.monotonic() < deadline, f"nothing waits on backend {pid}"
        time.sleep(0.02)


def _result(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:
        return exc


def _identity(engine: Engine, dispute_id: int) -> list[Any]:
    key = row(engine, dispute_id).reconciliation_key
    with engine.connect() as conn:
        return list(conn.execute(select(ledger).where(ledger.c.reconciliation_key == key)))
