"""A job's lines are listed in batch order (docs/api.md#jobs, issue 15): by
document, then line, as the batch had them, whatever each line's outcome and
whichever chunk settled first; pages and filters read one index, never a sort
of the job's rows."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from fastapi.testclient import TestClient
from sqlalchemy import Engine, case, event, func, inspect, select, update

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.engine import make_engine
from shared.adapters.db.jobs.lines import list_lines
from shared.adapters.db.migrate import alembic_config
from shared.domain.pipeline.messages import ChunkMessage
from shared.domain.synthetic import freight_contract
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import VIEWER_TOKEN, ServiceEnv, create_database, drop_database
from tests.support.ledger import dead_letters

pytestmark = pytest.mark.both_backends

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
Line = tuple[str, str, str]  # document_id, line_ref, outcome
OUTCOMES = ("posted", "disputed", "duplicate", "dead_lettered")


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


def _batch(vendor: str, posted_before: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Line]]:
    """Twelve documents in an order that is neither by id nor by line number,
    and the lines they come to, in batch order."""
    rng = random.Random(15)
    batch = uid("B-")  # each call's documents are new
    names = [f"{batch}-D{n:02d}" for n in range(12)]
    rng.shuffle(names)
    docs, expected = [], []
    for n, name in enumerate(names):
        numbers = rng.sample(range(1, 7), 3)
        lines = [promo_line(no, "8", "1.00") for no in numbers]
        outcomes = ["posted"] * 3
        if n == 1:  # an unknown tier: that line alone is dead-lettered
            lines[1] = promo_line(numbers[1], "8", "1.00", tier="T9")
            outcomes[1] = "dead_lettered"
        if n == 6:  # claimed 6.00 for a model of 5.00
            lines[0] = promo_line(numbers[0], "40", "6.00")
            outcomes[0] = "disputed"
        doc = promo_doc(vendor, lines, document_id=name)
        if n == 4:  # no contract at version 2: the whole document is dead-lettered
            doc["contract_version"] = 2
            outcomes = ["dead_lettered"] * 3
        if n == 7:  # sent by an earlier job
            doc = posted_before
            numbers = [line["line_no"] for line in doc["lines"]]
            outcomes = ["duplicate"] * len(numbers)
        if n == 10:  # the previous document again, in the same chunk
            doc = json.loads(json.dumps(docs[9]))
            numbers = [line["line_no"] for line in doc["lines"]]
            outcomes = ["duplicate"] * 3
        docs.append(doc)
        expected += [
            (doc["document_id"], str(no), o) for no, o in zip(numbers, outcomes, strict=True)
        ]
    return docs, expected


def _settle_job(
    ctx: WorkerContext,
    backend_env: ServiceEnv,
    docs: list[dict[str, Any]],
    per_chunk: int = 3,
    kind: str = "promo_accrual",
) -> tuple[str, int]:
    """Stored ``per_chunk`` documents a chunk, settled last chunk first (as
    parallel workers may): ids run against the batch's order."""
    settings = backend_env.settings(max_chunk_documents=per_chunk)
    job_id, messages = store_job(ctx.engine, settings, ctx.internal_key, docs, kind)
    for message in reversed(messages):
        settle_chunk(ctx, message, 1)
    return job_id, len(messages)


def _mixed_job(
    ctx: WorkerContext, backend_env: ServiceEnv, vendor: str
) -> tuple[str, list[dict[str, Any]], list[Line]]:
    """The batch of ``_batch`` settled in four chunks, after the earlier job it repeats."""
    earlier = promo_doc(vendor, [promo_line(5, "8", "1.00"), promo_line(2, "16", "2.00")])
    _settle_job(ctx, backend_env, [earlier])
    docs, expected = _batch(vendor, earlier)
    job_id, chunks = _settle_job(ctx, backend_env, docs)
    assert chunks == 4
    return job_id, docs, expected


@pytest.fixture(scope="module")
def vendor(ctx: WorkerContext) -> str:
    name = uid("V-")
    publish_promo_contracts(ctx.engine, [name])
    return name


@pytest.fixture(scope="module")
def mixed_job(ctx: WorkerContext, backend_env: ServiceEnv, vendor: str) -> tuple[str, list[Line]]:
    job_id, _, expected = _mixed_job(ctx, backend_env, vendor)
    return job_id, expected


def _pages(http: TestClient, job_id: str, limit: int, outcome: str | None = None) -> list[Line]:
    seen: list[Line] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        if outcome:
            params["outcome"] = outcome
        response = http.get(f"/v1/jobs/{job_id}/lines", params=params, headers=VIEWER)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) <= limit
        seen += [(i["document_id"], i["line_ref"], i["outcome"]) for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7, 36, 1000])
def test_every_page_size_lists_each_line_once_in_batch_order(
    http: TestClient, mixed_job: tuple[str, list[Line]], limit: int
) -> None:
    job_id, expected = mixed_job
    assert {o for _, _, o in expected} == set(OUTCOMES) and len(expected) == 35
    assert _pages(http, job_id, limit) == expected


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_an_outcome_filter_keeps_the_batch_order(
    http: TestClient, mixed_job: tuple[str, list[Line]], outcome: str
) -> None:
    job_id, expected = mixed_job
    wanted = [line for line in expected if line[2] == outcome]
    assert _pages(http, job_id, 2, outcome) == wanted
    assert _pages(http, job_id, 100, outcome) == wanted


@pytest.mark.parametrize("limit", [1, 2, 5, 36])
def test_overlapping_ranges_list_each_line_once_in_batch_order(
    ctx: WorkerContext, backend_env: ServiceEnv, http: TestClient, vendor: str, limit: int
) -> None:
    """Two units of one job committing at once draw interleaved ids, so their
    ranges overlap: made so here by widening each of the job's ranges over its
    neighbours' ids. Each line is still listed once, in batch order."""
    job_id, _, expected = _mixed_job(ctx, backend_env, vendor)
    r = tables.ledger_job_ranges
    with ctx.engine.begin() as conn:
        spans = conn.execute(select(r.c.first_id, r.c.last_id).where(r.c.job_id == job_id)).all()
        assert len(spans) > 1
        low, high = min(s.first_id for s in spans), max(s.last_id for s in spans)
        for first, last in spans:
            wider = r.update().where(r.c.job_id == job_id, r.c.first_id == first)
            conn.execute(wider.values(last_id=high if last < high else last))
        # A range starting below every other: a first id no other range has.
        widest = {"job_id": job_id, "first_id": low - 1, "last_id": high, "unpositioned": 0}
        conn.execute(r.insert().values(**widest, first_position=0, last_position=10**12))
    assert _pages(http, job_id, limit) == expected
    assert _pages(http, job_id, limit, "posted") == [e for e in expected if e[2] == "posted"]


def test_the_csv_export_streams_the_same_order(
    http: TestClient, mixed_job: tuple[str, list[Line]]
) -> None:
    job_id, expected = mixed_job
    response = http.get(f"/v1/jobs/{job_id}/lines.csv", headers=VIEWER)
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [(r["document_id"], r["line_ref"], r["outcome"]) for r in rows] == expected


def test_a_cursor_of_the_former_scheme_is_a_422(
    http: TestClient, mixed_job: tuple[str, list[Line]]
) -> None:
    job_id, _ = mixed_job
    for cursor in ("bGVkZ2VyfDM", "fGxlZGdlcnw"):  # "ledger|3" (source, id); "|ledger|"
        response = http.get(f"/v1/jobs/{job_id}/lines", params={"cursor": cursor}, headers=VIEWER)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_cursor"


def _requeue(ctx: WorkerContext, dead_letter_id: int) -> dict[str, Any]:
    """What the operator API does: mark requeued, then build the signed message."""
    with ctx.engine.begin() as conn:
        marked = dl_db.mark_requeued(conn, dead_letter_id)
        digest = conn.execute(
            select(tables.chunks.c.payload_sha256).where(tables.chunks.c.id == marked.chunk_id)
        ).scalar_one()
    return ChunkMessage(
        marked.chunk_id, marked.job_id, marked.kind, digest, marked.id, marked.requeues
    ).signed(ctx.internal_key)


def test_requeued_lines_keep_their_place(
    ctx: WorkerContext, backend_env: ServiceEnv, http: TestClient
) -> None:
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    job_id, docs, expected = _mixed_job(ctx, backend_env, vendor)
    assert _pages(http, job_id, 4) == expected
    letters = {d.line_ref is None: d for d in dead_letters(ctx.engine, job_id)}
    publish_promo_contracts(ctx.engine, [vendor], version=2)
    # The document now has its contract and posts; the T9 line fails again, a new
    # dead letter of the same line.
    for letter in letters.values():
        settle_chunk(ctx, _requeue(ctx, letter.id), 1)
    now = [
        (d, ref, "posted" if d == docs[4]["document_id"] else outcome)
        for d, ref, outcome in expected
    ]
    assert _pages(http, job_id, 4) == now
    again = {d.line_ref: d for d in dead_letters(ctx.engine, job_id) if d.status == "dead"}
    assert list(again) == [letters[False].line_ref]
    # Its second requeue still finds its place.
    settle_chunk(ctx, _requeue(ctx, again[letters[False].line_ref].id), 1)
    assert _pages(http, job_id, 3) == now


def test_a_requeued_whole_chunk_takes_its_chunks_place(
    ctx: WorkerContext, backend_env: ServiceEnv, http: TestClient, vendor: str
) -> None:
    """A chunk dead-lettered whole (its message tampered with) settles from its
    stored copy when requeued, its lines in their places before the next chunk's."""
    docs = [
        promo_doc(vendor, [promo_line(n, "8", "1.00") for n in (2, 1)], document_id=uid(f"W{i}-"))
        for i in range(4)
    ]
    settings = backend_env.settings(max_chunk_documents=2)
    job_id, [first, second] = store_job(ctx.engine, settings, ctx.internal_key, docs)
    settle_chunk(ctx, second, 1)
    settle_chunk(ctx, {**first, "kind": "freight_audit"}, 1)  # fails its signature
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.document_id, letter.lines) == ("signature_mismatch", None, 4)
    settle_chunk(ctx, _requeue(ctx, letter.id), 1)
    expected = [(d["document_id"], ref, "posted") for d in docs for ref in ("2", "1")]
    assert _pages(http, job_id, 3) == expected


def _from_before_positions(conn: Any, jobs: list[str], documents: set[str]) -> None:
    """The documents' rows of the jobs made as if written before migration 0013:
    no position, and the job's ranges as migration 0037 builds them for old rows
    (one a unit: a unit's rows share their ``created_at``)."""
    for table in (tables.ledger_entries, tables.line_outcomes):
        c = table.c
        mine = c.job_id.in_(jobs) & c.document_id.in_(documents)
        conn.execute(update(table).where(mine).values(position=None))
    le, r = tables.ledger_entries.c, tables.ledger_job_ranges
    conn.execute(r.delete().where(r.c.job_id.in_(jobs)))
    unplaced = func.sum(case((le.position.is_(None), 1), else_=0))
    rebuilt = (
        select(le.job_id, func.min(le.id), func.max(le.id), func.min(le.position))
        .add_columns(func.max(le.position), unplaced)
        .where(le.job_id.in_(jobs))
        .group_by(le.job_id, le.created_at)
    )
    columns = ["job_id", "first_id", "last_id", "first_position", "last_position", "unpositioned"]
    conn.execute(r.insert().from_select(columns, rebuilt))


def test_rows_from_before_positions_follow_the_positioned_ones(
    ctx: WorkerContext, backend_env: ServiceEnv, http: TestClient, vendor: str
) -> None:
    """Rows written before migration 0013 have no position: they are listed after
    the job's positioned lines, ledger rows then other outcomes, each by id."""
    job_id, docs, expected = _mixed_job(ctx, backend_env, vendor)
    old = {docs[n]["document_id"] for n in (0, 1, 7, 11)}
    unpositioned: list[tuple[int, int, Line]] = []
    with ctx.engine.begin() as conn:
        _from_before_positions(conn, [job_id], old)
        for rank, table in enumerate((tables.ledger_entries, tables.line_outcomes)):
            c = table.c
            mine = (c.job_id == job_id) & c.document_id.in_(old)
            listed = c.outcome.in_(("posted", "disputed") if rank == 0 else OUTCOMES[2:])
            for r in conn.execute(select(table).where(mine, listed)):
                unpositioned.append((rank, r.id, (r.document_id, r.line_ref, r.outcome)))
    order = [line for line in expected if line[0] not in old]
    order += [line for _, _, line in sorted(unpositioned)]
    for limit in (1, 2, 5, 13, 100):
        assert _pages(http, job_id, limit) == order
    for outcome in OUTCOMES:
        assert _pages(http, job_id, 3, outcome) == [line for line in order if line[2] == outcome]


def test_noted_lines_are_listed_in_place_with_their_note(
    ctx: WorkerContext, backend_env: ServiceEnv, http: TestClient
) -> None:
    """A freight leg whose invoice was mislabeled carries a note on its outcome row:
    listed from its ledger row, at its place, with the note."""
    carrier = uid("CARRIER-")
    put_contract(ctx.engine, "freight_audit", carrier, 1, freight_contract())
    edi = base64.b64encode(b"ISA*00*          *00*          *ZZ*CARRIER~").decode()  # X12

    def invoice(name: str, legs: list[int], **extra: Any) -> dict[str, Any]:
        return {
            "document_id": f"{carrier}-{name}",
            "partition_key": carrier,
            "contract_version": 1,
            "document_type": "EDI",
            "legs": [
                {"leg_no": n, "miles": "100", "accessorials": [], "billed_amount": "53.75"}
                for n in legs
            ],
            **extra,
        }

    docs = [
        invoice("B", [2, 1]),
        invoice("A", [3, 1, 2], document_type="PDF", raw_payload=edi),
        invoice("C", [1]),
    ]
    job_id, _ = _settle_job(ctx, backend_env, docs, per_chunk=2, kind="freight_audit")
    response = http.get(f"/v1/jobs/{job_id}/lines", params={"limit": 2}, headers=VIEWER)
    first = response.json()["items"]
    rest = http.get(
        f"/v1/jobs/{job_id}/lines",
        params={"limit": 10, "cursor": response.json()["next_cursor"]},
        headers=VIEWER,
    ).json()["items"]
    assert [(i["document_id"][-1], i["line_ref"], i["reason"]) for i in first + rest] == [
        ("B", "2", None),
        ("B", "1", None),
        ("A", "3", "document_type_corrected"),
        ("A", "1", "document_type_corrected"),
        ("A", "2", "document_type_corrected"),
        ("C", "1", None),
    ]
    assert {i["outcome"] for i in first + rest} == {"posted"}


def _plans(engine: Engine, run: Any) -> list[tuple[str, Any]]:
    """The statements ``run`` sends, each with its plan on this backend."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):  # not SQLite's BEGIN IMMEDIATE
            sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        run()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    plans = []
    with engine.connect() as conn, conn.begin():
        if engine.dialect.name == "postgresql":
            # Priced out (still used where nothing else can answer): a sort, and
            # any scan but an index's in its order. What is left shows whether an
            # index answers the filter in the order asked, whatever the planner
            # would choose on this small, test-shared ledger.
            for plan_type in ("sort", "seqscan", "bitmapscan"):
                conn.exec_driver_sql(f"SET LOCAL enable_{plan_type} = off")
        for statement, parameters in sent:
            if engine.dialect.name == "postgresql":
                explain = "EXPLAIN (FORMAT JSON) " + statement
                plan = conn.exec_driver_sql(explain, parameters).scalar_one()[0]["Plan"]
            else:
                explain = "EXPLAIN QUERY PLAN " + statement
                plan = [r[-1] for r in conn.exec_driver_sql(explain, parameters).all()]
            plans.append((statement, plan))
    return plans


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _every_line(engine: Engine, job_id: str) -> list[Any]:
    rows: list[Any] = []
    while True:
        after = rows[-1].cursor if rows else None
        page = list_lines(engine, job_id, outcome=None, after=after, limit=1000)
        rows += page
        if len(page) < 1000:
            return rows


def _large_jobs(ctx: WorkerContext, backend_env: ServiceEnv, vendor: str) -> dict[str, Any]:
    """A job of 2,000 lines (100 disputed) and one repeating it (2,000 duplicates),
    the rows of their last document made as if from before positions; for each,
    two cursors: into its last positioned lines, and among its unpositioned ones."""
    lines = [
        promo_line(n, "40", "6.00") if n == 7 else promo_line(n, "8", "1.00") for n in range(1, 21)
    ]
    docs = [promo_doc(vendor, lines) for _ in range(100)]
    jobs = [_settle_job(ctx, backend_env, docs, per_chunk=50)[0] for _ in range(2)]
    with ctx.engine.begin() as conn:
        _from_before_positions(conn, jobs, {docs[-1]["document_id"]})
        conn.exec_driver_sql("ANALYZE")
    cursors = {}
    for job_id in jobs:
        every = _every_line(ctx.engine, job_id)
        assert len(every) == 2000 and every[-1].position is None
        cursors[job_id] = [every[-30].cursor, every[-5].cursor]
    return cursors


def test_pages_read_the_job_index_in_order_and_sort_nothing(
    ctx: WorkerContext, backend_env: ServiceEnv, vendor: str
) -> None:
    """Every page, filtered or not, first or after a cursor, among positioned rows
    or not, reads the job's ranges by their key, then each range of the ledger's
    primary key (a unit's rows, sorted on their own: no more), and the other
    outcomes one range of a ``(job_id, [outcome,] position, id)`` index in its
    order, sorting nothing. (On this small ledger PostgreSQL may prefer a bitmap
    scan and a sort of a few rows, or, for the disputed filter, the dispute
    queue's index: the assertions are on what the indexes can do, see ``_plans``.)"""
    cursors = _large_jobs(ctx, backend_env, vendor)

    def pages() -> None:
        for job_id in cursors:
            for outcome in (None, *OUTCOMES):
                first = list_lines(ctx.engine, job_id, outcome=outcome, after=None, limit=100)
                for row in first[-1:]:
                    list_lines(ctx.engine, job_id, outcome=outcome, after=row.cursor, limit=100)
            for cursor in cursors[job_id]:
                list_lines(ctx.engine, job_id, outcome=None, after=cursor, limit=10)

    plans = _plans(ctx.engine, pages)
    assert len(plans) > 30
    for statement, plan in plans:
        if ctx.engine.dialect.name == "postgresql":
            _assert_in_index_order(statement, list(_nodes(plan)))
        else:
            _assert_searched_in_order(statement, plan)


JOB_INDEXES = {
    "pk_ledger_job_ranges",
    "ix_ledger_entries_job_disputes",
    "ix_line_outcomes_job_id_outcome_position_id",
}
SQLITE_JOB_INDEXES = {"sqlite_autoindex_ledger_job_ranges_1", *JOB_INDEXES}


def _in_a_range(statement: str) -> bool:
    """Does the statement read a range of the ledger's ids (a unit's rows)?"""
    return "ledger_entries.id BETWEEN" in statement


def _assert_in_index_order(statement: str, nodes: list[dict[str, Any]]) -> None:
    """PostgreSQL: index scans of the job indexes, and no sort; or one range of
    the ledger's primary key, its rows sorted."""
    summary = [(n["Node Type"], n.get("Index Name")) for n in nodes]
    scans = [n for n in nodes if "Scan" in n["Node Type"]]
    assert scans and all(n["Node Type"] == "Index Scan" for n in scans), (statement, summary)
    if _in_a_range(statement):
        assert {n["Index Name"] for n in scans} == {"pk_ledger_entries"}, (statement, summary)
        return
    assert {n["Index Name"] for n in scans} <= JOB_INDEXES, (statement, summary)
    if "ledger_job_ranges" not in statement:  # a job's few ranges: sorted in Python
        assert not [n for n in nodes if "Sort" in n["Node Type"]], (statement, summary)


def _assert_searched_in_order(statement: str, steps: list[str]) -> None:
    """SQLite: every step searches a job index, and none sorts (a temp b-tree);
    or one range of the ledger's rowid."""
    searches = [step for step in steps if step.startswith(("SEARCH", "SCAN"))]
    assert searches, (statement, steps)
    if _in_a_range(statement):
        assert all("INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in s for s in searches), steps
        return
    assert not [step for step in steps if "TEMP B-TREE" in step], (statement, steps)
    indexed = [any(ix in step for ix in SQLITE_JOB_INDEXES) for step in searches]
    assert all(indexed), (statement, steps)


@pytest.fixture
def fresh_url(backend: str, tmp_path: Any) -> Iterator[str]:
    """An empty database on the module's backend."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    name = f"settleq_test_m13_{uid()}"
    url = create_database(name)
    try:
        yield url
    finally:
        drop_database(name)


def _job_indexes(engine: Engine) -> dict[str, list[str]]:
    found = {}
    for table in ("ledger_entries", "line_outcomes"):
        for index in inspect(engine).get_indexes(table):
            if index["column_names"][0] == "job_id":
                found[str(index["name"])] = list(index["column_names"])
    return found


def test_migration_0013_goes_up_and_down(fresh_url: str) -> None:
    """Up: the position columns and the new job indexes, instead of the old ones,
    and a row written before stays listed (by id, without a position). Down: the
    old indexes back, the columns gone. Up again: exactly the declared schema."""
    config = alembic_config(fresh_url)
    command.upgrade(config, "0012")
    engine = make_engine(fresh_url)
    try:
        before = {
            "reconciliation_key": "a" * 64,
            "contract_version": 1,
            "kind": "promo_accrual",
            "partition_key": "V",
            "document_id": "D",
            "line_ref": "1",
            "job_id": "j13",
            "outcome": "posted",
            "amount": Decimal("1.00"),
            "claimed_amount": Decimal("1.00"),
            "delta": Decimal("1.00"),
            "created_at": dt.datetime.now(dt.UTC),
        }
        with engine.begin() as conn:
            # The declared table's types, its columns of 0012 only.
            conn.execute(tables.ledger_entries.insert().values(**before))
        command.upgrade(config, "head")
        assert _job_indexes(engine) == {  # the ledger's, by migration 0037
            "ix_ledger_entries_job_disputes": ["job_id", "position", "id"],
            "ix_line_outcomes_job_id_outcome_position_id": _NEW,
        }
        [line] = list_lines(engine, "j13", outcome=None, after=None, limit=10)
        assert (line.document_id, line.position, line.outcome) == ("D", None, "posted")
        command.downgrade(config, "0012")
        assert _job_indexes(engine) == {
            "ix_ledger_entries_job_id_id": ["job_id", "id"],
            "ix_line_outcomes_job_id_outcome_id": ["job_id", "outcome", "id"],
        }
        for table in ("ledger_entries", "line_outcomes", "dead_letters"):
            assert "position" not in {c["name"] for c in inspect(engine).get_columns(table)}
        command.upgrade(config, "head")
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), tables.metadata) == []
    finally:
        engine.dispose()


_NEW = ["job_id", "outcome", "position", "id"]
