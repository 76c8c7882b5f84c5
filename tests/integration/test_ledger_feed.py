"""The ledger feed gives every row once, in commit order, and never skips a row
that commits late (docs/api.md#the-ledger-feed,
docs/architecture.md#the-ledger-feed).

The database is shared with the rest of the suite: the feed carries other
tests' rows too, and another test's open transaction may hold it back for a
while. So each test reads what its own jobs wrote, and waits for rows on a
deadline rather than expecting them at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, func, select, text

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.engine import make_engine
from shared.adapters.db.ledger.read import feed
from shared.config.settings import Settings
from shared.domain.feed import START, Position, parse_cursor
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.settlement import plan_chunk
from shared.domain.pipeline.units import ChunkRef
from shared.domain.signing import sign_request
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.infra import (
    SCOPED_ID,
    SCOPED_PARTITIONS,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
    isolated_env,
    migrate,
)
from tests.support.ledger import commit_plan
from tests.support.periods import book_match

KIND = get_kind("promo_accrual")
CONTRACTS = {
    version: PromoContract.model_validate({"tier_rates": {"T1": rate}, "tolerance": "0.05"})
    for version, rate in ((1, "0.125"), (2, "0.150"))
}
VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
DEADLINE_S = 120.0  # another test's open transaction may hold the feed back meanwhile


def _unit(engine: Engine, docs: list[dict[str, Any]]) -> tuple[ChunkRef, Any]:
    """A stored job of one chunk, and its plan."""
    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    contracts = {(d.partition_key, v): CONTRACTS[v] for d in parsed for v in CONTRACTS}
    ref = ChunkRef(message["chunk_id"], job_id, "promo_accrual", sum(len(d.lines) for d in parsed))
    return ref, plan_chunk(KIND, parsed, contracts)


def _settle(engine: Engine, docs: list[dict[str, Any]]) -> str:
    ref, plan = _unit(engine, docs)
    with engine.begin() as conn:
        commit_plan(conn, ref, plan, 1)
    return ref.job_id


def _ids(engine: Engine, job_ids: set[str]) -> list[int]:
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        query = select(ledger.c.id).where(ledger.c.job_id.in_(job_ids)).order_by(ledger.c.id)
        return list(conn.execute(query).scalars())


def _now(engine: Engine) -> Position:
    with engine.connect() as conn:
        return feed.now(conn)


class Poller:
    """A consumer: pages of ``limit`` from ``after``, always resuming from the
    page's next position. It keeps every row it receives: a job's id may be
    known to the test only after its rows have come."""

    def __init__(self, engine: Engine, after: Position, job_ids: set[str], limit: int) -> None:
        self.engine, self.position, self.job_ids, self.limit = engine, after, job_ids, limit
        self.received: list[Any] = []

    @property
    def rows(self) -> list[Any]:
        """What it received of its jobs, in the order received."""
        return [r for r in self.received if r.job_id in self.job_ids]

    def poll(self) -> int:
        with self.engine.connect() as conn:
            page = feed.page(conn, self.position, partitions=None, kind=None, limit=self.limit)
        assert page.next >= self.position  # a cursor never goes back
        self.position = page.next
        self.received += page.rows
        return len(page.rows)

    def until(self, count: int) -> list[Any]:
        """Poll until ``count`` rows of its jobs have come (or the deadline)."""
        deadline = time.monotonic() + DEADLINE_S
        while len(self.rows) < count and time.monotonic() < deadline:
            if self.poll() == 0:
                time.sleep(0.05)
        return self.rows


@pytest.mark.both_backends
def test_every_row_comes_once_to_a_poller_racing_concurrent_writers(engine: Engine) -> None:
    """Four writers commit units (first versions, re-pricings of earlier units'
    lines) while a poller with a small limit reads; the union of what it
    received is every ledger row of those jobs, none twice, each re-pricing
    after the row it supersedes."""
    vendors = [uid("FEED-") for _ in range(3)]
    start = _now(engine)
    jobs: set[str] = set()
    firsts: list[dict[str, Any]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(6):
                vendor = vendors[(n + i) % len(vendors)]
                lines = [promo_line(j, str(2 + j), "0.25") for j in range(1, 1 + (i % 3) + 1)]
                doc = promo_doc(vendor, lines)
                docs = [doc]
                with lock:
                    if firsts and i % 2:
                        # A re-pricing of an earlier document: its rows supersede.
                        docs.append({**firsts.pop(0), "contract_version": 2})
                job_id = _settle(engine, docs)
                with lock:
                    jobs.add(job_id)
                    firsts.append(doc)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    poller = Poller(engine, start, jobs, limit=3)
    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        poller.poll()
    for w in writers:
        w.join()
    assert not errors, errors
    expected = _ids(engine, jobs)
    received = poller.until(len(expected))
    got = [r.id for r in received]
    assert len(got) == len(set(got)), "a row came twice"
    assert sorted(got) == expected
    seen: set[int] = set()
    for row in received:
        assert (
            row.supersedes_id is None
            or row.supersedes_id in seen
            or (row.supersedes_id not in expected)
        ), f"row {row.id} came before the row it supersedes ({row.supersedes_id})"
        seen.add(row.id)
    assert any(r.supersedes_id is not None for r in received)  # re-pricings were raced


def test_a_transaction_that_took_its_ids_first_and_commits_last_is_not_skipped(
    engine: Engine,
) -> None:
    """The out-of-order commit, forced: A inserts its rows (the lower ids) and
    stays open while B inserts and commits. "id greater than the last seen"
    then reads B's rows and, once A commits, never reads A's. The feed holds
    B back until A has ended, then gives A's rows and B's, each once."""
    start = _now(engine)
    ref_a, plan_a = _unit(engine, [promo_doc(uid("LATE-"), [promo_line(1, "3", "0.38")])])
    ref_b, plan_b = _unit(engine, [promo_doc(uid("EARLY-"), [promo_line(1, "5", "0.63")])])
    jobs = {ref_a.job_id, ref_b.job_id}
    poller = Poller(engine, start, jobs, limit=1000)
    with engine.connect() as a:
        transaction = a.begin()
        commit_plan(a, ref_a, plan_a, 1)
        with engine.begin() as b:
            commit_plan(b, ref_b, plan_b, 1)
        b_ids = _ids(engine, {ref_b.job_id})
        # What a poller by id reads now: B's rows only; it would resume after them.
        assert _ids(engine, jobs) == b_ids
        last_seen_by_id = max(b_ids)
        poller.poll()
        assert poller.rows == [], "the feed gave a row behind an open transaction"
        transaction.commit()
    a_ids = _ids(engine, {ref_a.job_id})
    assert max(a_ids) < min(b_ids)  # A took its ids first ...
    assert [i for i in a_ids if i > last_seen_by_id] == []  # ... so "id > last" skips them
    received = [r.id for r in poller.until(len(a_ids) + len(b_ids))]
    assert received == a_ids + b_ids


def test_an_open_transaction_holds_the_feed_back_and_says_how_long(
    engine: Engine, test_env: ServiceEnv
) -> None:
    """A transaction left open elsewhere holds back rows committed after it
    began: never skipped, given once it ends; meanwhile
    settleq_ledger_feed_held_back_seconds says how long."""
    start = _now(engine)
    with engine.connect() as holder:
        holding = holder.begin()
        holder.execute(text("SELECT pg_current_xact_id()"))  # it takes a transaction id
        job_id = _settle(engine, [promo_doc(uid("HELD-"), [promo_line(1, "4", "0.50")])])
        poller = Poller(engine, start, {job_id}, limit=1000)
        deadline = time.monotonic() + DEADLINE_S
        held = 0.0
        while held < 1.0 and time.monotonic() < deadline:
            poller.poll()
            with engine.connect() as conn:
                held = feed.held_back_seconds(conn)
            time.sleep(0.1)
        assert poller.rows == []
        assert held >= 1.0
        with TestClient(create_app(test_env.settings())) as http:
            metrics = http.get("/metrics", headers=VIEWER).text
        [line] = [m for m in metrics.splitlines() if m.startswith("settleq_ledger_feed_held_back")]
        assert float(line.split()[-1]) >= 1.0
        holding.rollback()
    assert [r.id for r in poller.until(1)] == _ids(engine, {job_id})


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


def _get(http: TestClient, **params: Any) -> Any:
    return http.get("/v1/ledger/feed", params=params, headers=VIEWER)


@pytest.mark.parametrize(
    "params",
    [
        {"after": "nonsense"},
        {"after": "ZjF8MXwyfDN8YWJjZGVmMDEyMzQ1"},  # a cursor's shape, a wrong check
        {"after": START.cursor()[:-2]},  # cut short
        {"wait": "31"},
        {"wait": "-1"},
        {"wait": "nan"},
        {"limit": "0"},
        {"limit": "1001"},
        {"kind": "no_such_kind"},
        {"partition_key": "V-1 "},  # a trailing space: no partition key
    ],
)
def test_what_is_not_a_feed_request_is_422_never_a_5xx(http: TestClient, params: Any) -> None:
    answer = _get(http, **params)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"]


def test_the_http_feed_pages_from_now_with_a_cursor_always(
    http: TestClient, engine: Engine
) -> None:
    """``after=now`` starts at the end; every page has a ``next_cursor``, an empty
    one too; items carry every ledger column, money as strings; a filtered page
    gives its partition's rows only."""
    first = _get(http, after="now").json()
    assert first["items"] == [] and first["next_cursor"]
    vendor, other = uid("HTTP-"), uid("HTTP-")
    job_id = _settle(engine, [promo_doc(vendor, [promo_line(1, "8", "1.00")])])
    _settle(engine, [promo_doc(other, [promo_line(1, "8", "1.00")])])
    cursor, items = first["next_cursor"], []
    deadline = time.monotonic() + DEADLINE_S
    while not items and time.monotonic() < deadline:
        page = _get(http, after=cursor, partition_key=vendor, kind="promo_accrual", limit=1000)
        body = page.json()
        assert page.status_code == 200 and body["next_cursor"]
        cursor, items = body["next_cursor"], body["items"]
    [item] = items
    assert item["job_id"] == job_id and item["partition_key"] == vendor
    assert item["amount"] == "1.00" and item["claimed_amount"] == "1.00"
    assert set(item) >= {"id", "reconciliation_key", "contract_version", "kind", "document_id"}
    assert set(item) >= {"line_ref", "outcome", "delta", "supersedes_id", "correlation_id"}
    assert item["created_at"].endswith("Z")
    again = _get(http, after=cursor, partition_key=vendor).json()
    assert again["items"] == [] and again["next_cursor"]


def test_the_feed_carries_a_remittances_deducted_and_written_off_rows(
    http: TestClient, engine: Engine
) -> None:
    """A remittance's rows are ledger rows like any other: the feed gives them,
    with the remittance as their correlation and delta minus the money taken."""
    start = _get(http, after="now").json()["next_cursor"]
    vendor = uid("RM-")
    _settle(engine, [promo_doc(vendor, [promo_line(1, "8", "1.00")], document_id=uid("INV-"))])
    with engine.connect() as conn:
        document = conn.execute(
            select(tables.ledger_entries.c.document_id).where(
                tables.ledger_entries.c.partition_key == vendor
            )
        ).scalar_one()
    book_match(engine, vendor, document, "deducted", "0.90", claimed="0.95")
    book_match(engine, vendor, document, "written_off", "0.05", claimed="0.95")
    cursor, items = start, []
    deadline = time.monotonic() + DEADLINE_S
    while len(items) < 3 and time.monotonic() < deadline:
        page = _get(http, after=cursor, partition_key=vendor, limit=1000)
        assert page.status_code == 200, page.text
        cursor = page.json()["next_cursor"]
        items += page.json()["items"]
    assert [(i["outcome"], i["delta"], i["document_id"]) for i in items] == [
        ("posted", "1.00", document),
        ("deducted", "-0.90", document),
        ("written_off", "-0.05", document),
    ]
    assert items[1]["correlation_id"] == items[1]["job_id"] and items[1]["line_ref"] == "D1"
    assert items[1]["claimed_amount"] == "0.95" and items[1]["supersedes_id"] is None


def test_long_polls_hear_a_commit_and_hold_no_connection_while_they_wait(
    http: TestClient, engine: Engine
) -> None:
    """Twenty consumers wait on one partition: meanwhile the API's pool lends
    at most the one connection of the process's watch, briefly; the commit
    reaches each of them."""
    start = _get(http, after="now").json()["next_cursor"]
    vendor = uid("WAIT-")
    answers: list[Any] = []

    def wait() -> None:
        answers.append(_get(http, after=start, partition_key=vendor, wait="30").json())

    waiting = [threading.Thread(target=wait) for _ in range(20)]
    for w in waiting:
        w.start()
    ctx = http.app.state.ctx  # type: ignore[attr-defined]
    deadline = time.monotonic() + DEADLINE_S
    while ctx.feed_watch.waiting < 20:  # each has read its empty page and waits
        assert time.monotonic() < deadline, ctx.feed_watch.waiting
        time.sleep(0.02)
    lent = []
    for _ in range(50):  # a second of their wait
        lent.append(ctx.engine.pool.checkedout())
        time.sleep(0.02)
    job_id = _settle(engine, [promo_doc(vendor, [promo_line(1, "8", "1.00")])])
    for w in waiting:
        w.join()
    assert max(lent) <= 1, lent
    assert [[i["job_id"] for i in a["items"]] for a in answers] == [[job_id]] * 20


def test_a_scoped_producer_reads_its_own_partitions_only(http: TestClient, engine: Engine) -> None:
    own = SCOPED_PARTITIONS[0]
    stranger = uid("NOT-")
    start = _get(http, after="now").json()["next_cursor"]
    mine = _settle(engine, [promo_doc(own, [promo_line(1, "2", "0.25")])])
    _settle(engine, [promo_doc(stranger, [promo_line(1, "2", "0.25")])])

    def signed(query: str) -> Any:
        return _signed(http, query)

    refused = signed(f"after={start}&partition_key={stranger}")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "partition_not_allowed"
    seen: list[Any] = []
    cursor, deadline = start, time.monotonic() + DEADLINE_S
    while not any(i["job_id"] == mine for i in seen) and time.monotonic() < deadline:
        body = signed(f"after={cursor}&limit=1000").json()
        seen += body["items"]
        cursor = body["next_cursor"]
    assert {i["partition_key"] for i in seen} <= set(SCOPED_PARTITIONS)
    assert any(i["job_id"] == mine for i in seen)


def _signed(http: TestClient, query: str) -> Any:
    """A GET of the feed signed by the scoped producer key."""
    path = f"/v1/ledger/feed?{query}"
    headers = {
        "X-Key-Id": SCOPED_ID,
        "X-Signature": sign_request(SCOPED_SECRET, int(time.time()), "GET", path, b""),
    }
    return http.get(path, headers=headers)


@pytest.fixture(scope="module")
def own_env() -> Iterator[ServiceEnv]:
    """A database of its own: where a filtered scan's budget ends depends on
    every unit in the feed, so no other test's may come between."""
    with isolated_env("feedcut") as env:
        yield env


def _plan(docs: list[dict[str, Any]]) -> Any:
    parsed = [PromoDocument.model_validate(d) for d in docs]
    contracts = {(d.partition_key, v): CONTRACTS[v] for d in parsed for v in CONTRACTS}
    return plan_chunk(KIND, parsed, contracts)


def _big_unit(engine: Engine, docs: list[dict[str, Any]]) -> None:
    """One unit of ``docs``, however many chunks its job was cut into."""
    job_id, messages = store_job(engine, Settings(), b"k", docs)
    lines = sum(len(d["lines"]) for d in docs)
    ref = ChunkRef(messages[0]["chunk_id"], job_id, "promo_accrual", lines)
    with engine.begin() as conn:
        commit_plan(conn, ref, _plan(docs), 1)


def _last_unit(engine: Engine) -> int:
    o = tables.outbox.c
    with engine.connect() as conn:
        last: int = conn.execute(
            select(func.max(o.id)).where(o.ledger_entry_ids.is_not(None))
        ).scalar_one()
    return last


def _lines(count: int) -> list[dict[str, Any]]:
    return [promo_line(n, "8", "1.00") for n in range(1, count + 1)]


def test_a_long_poll_hears_a_committed_row_past_where_its_scan_budget_ended(
    own_env: ServiceEnv,
) -> None:
    """Issue 52 item 2: three units of about 3,000 rows of X, then one of 4,000
    rows of X and 1 of Y. A filtered scan's 10,000-row budget ends inside that
    last committed unit, before Y's row; a long poll for Y (by its filter, or
    by a producer key's scope) must read on and answer with the row, not wait
    its whole ``wait`` for a unit yet to come."""
    assert feed.FILTERED_SCAN == 10_000  # the repro's sizes are set by it
    outsider, y = uid("CUT-X-"), SCOPED_PARTITIONS[0]
    last_x = promo_doc(outsider, _lines(4000))
    # A unit's rows take their ids in reconciliation key order: Y's row comes
    # after rank - 1 of X's, and the units before hold what makes the budget
    # end just before it.
    rank = 1
    while rank == 1:  # (the budget cannot end inside the unit before its first row)
        y_doc = promo_doc(y, _lines(1))
        [(y_key, _)] = _plan([y_doc]).claim_keys()
        rank = [k for k, _ in _plan([last_x, y_doc]).claim_keys()].index(y_key) + 1
    before = feed.FILTERED_SCAN - (rank - 1)
    with TestClient(create_app(own_env.settings())) as http:
        engine = http.app.state.ctx.engine  # type: ignore[attr-defined]
        start = _get(http, after="now").json()["next_cursor"]
        for size in (before // 3, before // 3, before - 2 * (before // 3)):
            _big_unit(engine, [promo_doc(outsider, _lines(size))])
        _big_unit(engine, [last_x, y_doc])
        last = _last_unit(engine)
        deadline = time.monotonic() + DEADLINE_S
        while True:  # another database's open transaction may hold the horizon back
            with engine.connect() as conn:
                end = feed.frontier(conn)
                cut = feed.page(conn, parse_cursor(start), partitions=[y], kind=None, limit=100)
            if end.unit == last or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        # The repro holds: the budget ends inside the last committed unit.
        assert cut.rows == [] and (cut.next.xid, cut.next.unit) == (end.xid, end.unit)

        viewer = _get(http, after=start, partition_key=y, wait="10").json()
        producer = _signed(http, f"after={start}&wait=10").json()
    assert [i["partition_key"] for i in viewer["items"]] == [y]
    assert [i["partition_key"] for i in producer["items"]] == [y]


def _recipe_request(recipe: str, at: str, price: str, locations: list[str]) -> dict[str, Any]:
    return {
        "document_id": uid("RQ-"),
        "partition_key": recipe,
        "contract_version": 1,
        "recipe_id": recipe,
        "location_ids": locations,
        "effective_at": at,
        "pricing_snapshot": {"FLOUR": price},
        "trigger": "vendor_rate",
    }


def _settle_recipes(ctx: WorkerContext, docs: list[dict[str, Any]]) -> str:
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, "recipe_cost")
    for message in messages:
        assert settle_chunk(ctx, message, 1) is not None
    return job_id


def test_a_store_reads_its_own_locations_rows_across_recipes_by_line_ref(
    http: TestClient, ctx: WorkerContext
) -> None:
    """Issue 52 item 4: ``line_ref`` filters on the row's line, a recipe_cost
    line being a location: a store's long poll receives its location's rows of
    every recipe, each once, in commit order (a re-pricing after the row it
    supersedes), and none of another store's."""
    store, other = uid("STORE-"), uid("STORE-")
    recipes = [uid("RECIPE-") for _ in range(3)]
    for recipe in recipes:
        put_contract(ctx.engine, "recipe_cost", recipe, 1, {"bom": {"FLOUR": "2"}})
    start = _get(http, after="now").json()["next_cursor"]
    jobs = {
        _settle_recipes(
            ctx,
            [_recipe_request(r, "2026-03-01T00:00:00Z", "3.00", [store, other]) for r in recipes],
        ),
        _settle_recipes(
            ctx, [_recipe_request(recipes[0], "2026-04-01T00:00:00Z", "4.00", [store])]
        ),
        _settle_recipes(
            ctx, [_recipe_request(recipes[1], "2026-04-01T00:00:00Z", "4.00", [other])]
        ),
        _settle(ctx.engine, [promo_doc(uid("NOISE-"), [promo_line(1, "8", "1.00")])]),
    }
    ledger = tables.ledger_entries
    with ctx.engine.connect() as conn:
        query = select(ledger.c.id).where(ledger.c.job_id.in_(jobs), ledger.c.line_ref == store)
        expected = sorted(conn.execute(query).scalars())
    assert len(expected) == 4  # three recipes at the store, one re-priced

    items: list[Any] = []
    cursor, deadline = start, time.monotonic() + DEADLINE_S
    while len(items) < len(expected) and time.monotonic() < deadline:
        body = _get(http, after=cursor, line_ref=store, limit=2, wait="5").json()
        items += body["items"]
        cursor = body["next_cursor"]
    assert {i["line_ref"] for i in items} == {store}
    assert [i["id"] for i in items] == expected  # each once, in commit order
    assert {i["partition_key"] for i in items} == set(recipes)
    [repriced] = [i for i in items if i["supersedes_id"] is not None]
    assert repriced["supersedes_id"] in [i["id"] for i in items[: items.index(repriced)]]
    again = _get(http, after=cursor, line_ref=store).json()
    assert again["items"] == []


@pytest.mark.parametrize("line_ref", ["", "x" * 129])
def test_a_line_ref_that_is_no_line_is_422(http: TestClient, line_ref: str) -> None:
    answer = _get(http, line_ref=line_ref)
    assert answer.status_code == 422, answer.text


class PageReads:
    """Counts the feed's page reads on an engine: the statement that reads the
    rows a page gives (every ledger column), not the watch's."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.count = engine, 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM ledger_entries" in statement and "reconciliation_key" in statement:
            self.count += 1

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


@pytest.fixture(params=["postgresql", "sqlite"])
def quiet_env(request: pytest.FixtureRequest, own_env: ServiceEnv, tmp_path: Path) -> ServiceEnv:
    """A ledger no other test writes to, on each backend: the module's own
    PostgreSQL database, or a SQLite file of the test's own."""
    if request.param == "postgresql":
        return own_env
    url = f"sqlite:///{tmp_path / 'settleq.db'}"
    migrate(url)
    return ServiceEnv(database_url=url, queue_prefix=own_env.queue_prefix)


def test_identical_waiters_share_one_read_and_a_filter_wakes_only_for_its_rows(
    quiet_env: ServiceEnv,
) -> None:
    """Issue 52 item 5: twenty consumers wait on partition P from one cursor,
    twenty on Q. A unit of P's rows wakes P's waiters only, and they read one
    page between them; Q's go on waiting, reading nothing, until a unit of Q's
    rows wakes them in turn."""
    p, q = uid("SHARE-P-"), uid("SHARE-Q-")
    writer = make_engine(quiet_env.database_url)
    with TestClient(create_app(quiet_env.settings())) as http:
        ctx = http.app.state.ctx  # type: ignore[attr-defined]
        start = _get(http, after="now").json()["next_cursor"]
        answers: dict[str, list[Any]] = {p: [], q: []}

        def wait(partition: str) -> None:
            page = _get(http, after=start, partition_key=partition, limit=10, wait="30").json()
            answers[partition].append(page)

        waiting = {
            key: [threading.Thread(target=wait, args=(key,)) for _ in range(20)] for key in (p, q)
        }
        reads = PageReads(ctx.engine)
        try:
            for thread in waiting[p] + waiting[q]:
                thread.start()
            deadline = time.monotonic() + DEADLINE_S
            while ctx.feed_watch.waiting < 40:  # each has read its empty page and waits
                assert time.monotonic() < deadline, ctx.feed_watch.waiting
                time.sleep(0.02)
            reads.count = 0  # (an empty feed's page reads no row)
            p_job = _settle(writer, [promo_doc(p, [promo_line(1, "8", "1.00")])])
            for thread in waiting[p]:
                thread.join(timeout=DEADLINE_S)
            assert [[i["job_id"] for i in a["items"]] for a in answers[p]] == [[p_job]] * 20
            assert reads.count == 1  # one read for P's twenty, none for Q's
            assert ctx.feed_watch.waiting == 20 and answers[q] == []

            q_job = _settle(writer, [promo_doc(q, [promo_line(1, "8", "1.00")])])
            for thread in waiting[q]:
                thread.join(timeout=DEADLINE_S)
            assert [[i["job_id"] for i in a["items"]] for a in answers[q]] == [[q_job]] * 20
            assert reads.count == 2
        finally:
            reads.close()
            writer.dispose()
