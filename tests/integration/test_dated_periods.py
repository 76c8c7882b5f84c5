"""Dated booking periods (docs/architecture.md#dated-periods-the-cut-at-ends_at):
the cut at ends_at is the close's cut, made once however many processes race
to it, a cut missed while nothing ran is made before anything books, the
close of an ended period only makes it final, and an existing deployment
stays manual. Periods are made a few seconds long by the drills' setting
(SETTLEQ_PERIOD_SECONDS). Each test has a ledger of its own."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from services.api.app import create_app
from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import alembic_config, ensure_internal_key, upgrade
from shared.adapters.db.operators.tables import audit_log
from shared.adapters.db.periods import booking, close, dated, reads
from shared.adapters.db.periods.tables import periods
from shared.adapters.db.types import utc
from shared.config.settings import Settings
from shared.domain.period_dates import Calendar
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, create_database, drop_database
from tests.support.periods import settle_promo

ACCOUNTS = Settings().journaling()
OP = "f" * 16
ledger = tables.ledger_entries
VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture
def fresh_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database never migrated."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'dated.db'}"
        return
    name = f"settleq_test_dated_{uid()}"
    url = create_database(name)
    try:
        yield url
    finally:
        drop_database(name)


def _migrate(url: str, calendar: Calendar | None) -> Engine:
    upgrade(url, None, calendar)
    engine = make_engine(url)
    ensure_internal_key(engine)
    return engine


def _seconds(n: int) -> Calendar:
    return Calendar("seconds", "UTC", n)


def _until_a_second_or_more_left(n: int, seconds: float = 1.2) -> None:
    """Starts a test's first period with at least ``seconds`` of it left, so
    it does not end before the test has done what it must do before its end."""
    left = n - time.time() % n
    if left < seconds:
        time.sleep(left + 0.05)


def _sleep_until(when: dt.datetime) -> None:
    """Until ``when`` has passed: at once if it has (a busy machine may get
    there late), never a negative sleep."""
    time.sleep(max((when - dt.datetime.now(dt.UTC)).total_seconds(), 0.0))


def _periods(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(periods).order_by(periods.c.seq)).all())


def _audited(engine: Engine, action: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(audit_log).where(audit_log.c.action == action)).all())


def _open(engine: Engine) -> Any:
    return next(p for p in _periods(engine) if p.status == "open")


def _wait_for(what: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("not within the timeout")


def test_a_ledger_migrated_with_dated_periods_starts_in_the_calendars_period(
    fresh_url: str,
) -> None:
    engine = _migrate(fresh_url, Calendar("quarter", "Europe/Paris"))
    try:
        [first] = _periods(engine)
        today = Calendar("quarter", "Europe/Paris").containing(dt.datetime.now(dt.UTC))
        assert (first.name, first.status) == (today.name, "open")
        assert (utc(first.starts_at), utc(first.ends_at)) == (today.starts_at, today.ends_at)
        # Migrating again changes nothing: the mode is the ledger's.
        upgrade(fresh_url, None, Calendar("month"))
        assert [p.name for p in _periods(engine)] == [today.name]
    finally:
        engine.dispose()


def test_the_cut_at_ends_at_books_each_transaction_whole_on_one_side(
    fresh_url: str,
) -> None:
    length = 3
    _until_a_second_or_more_left(length)
    engine = _migrate(fresh_url, _seconds(length))
    cutter = dated.Cutter(engine, _seconds(length), "UTC", 30.0).start()
    stop = threading.Event()
    errors: list[BaseException] = []

    def settle() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            doc = promo_doc(f"V-{n % 3}", [promo_line(1, "10", "1.25"), promo_line(2, "4", "0.50")])
            try:
                settle_promo(engine, [doc])
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)
                return

    settlers = [threading.Thread(target=settle) for _ in range(2)]
    try:
        for t in settlers:
            t.start()
        # Two cuts while settlement runs.
        _wait_for(lambda: len([p for p in _periods(engine) if p.status == "ended"]) >= 2, 30)
    finally:
        stop.set()
        for t in settlers:
            t.join(30)
        cutter.close()
    try:
        assert not errors
        ended = [p for p in _periods(engine) if p.status == "ended"]
        with engine.connect() as conn:
            rows = conn.execute(
                select(ledger.c.id, ledger.c.period, ledger.c.job_id, ledger.c.created_at)
            ).all()
        assert rows
        for p in ended:
            mine = [r for r in rows if r.period == p.name]
            # Every row booked in it was made before its cut (how soon after
            # ends_at the cut comes is bench/cut_latency.py's figure, not a
            # test's: a busy machine wakes the cutter late).
            assert all(utc(r.created_at) <= utc(p.ended_at) for r in mine)
            # Its rows are its id range: none of a later period came before its cut.
            assert all(p.after_id < r.id <= p.last_id for r in mine)
            assert utc(p.ended_at) >= utc(p.ends_at)  # never before its end
        sides: dict[str, set[str]] = {}
        for r in rows:
            sides.setdefault(r.job_id, set()).add(r.period)
        assert all(len(s) == 1 for s in sides.values())  # a transaction never splits
        names = [p.name for p in _periods(engine)]
        assert len(_audited(engine, "period.end")) == len(ended) == len(names) - 1
    finally:
        engine.dispose()


def test_cutters_racing_cut_once(fresh_url: str) -> None:
    length = 2
    _until_a_second_or_more_left(length)
    engine = _migrate(fresh_url, _seconds(length))
    engines = [make_engine(fresh_url) for _ in range(4)]
    try:
        [first] = _periods(engine)
        _sleep_until(utc(first.ends_at) + dt.timedelta(seconds=0.05))
        found: list[list[str]] = []
        barrier = threading.Barrier(len(engines))

        def cut(own: Engine, leased: bool) -> None:
            barrier.wait()
            if leased:
                found.append(dated.catch_up(own, _seconds(length), "UTC", 30.0))
            else:  # the transaction alone is the guarantee
                found.append(dated.cut_due(own, _seconds(length), "UTC", 30.0))

        threads = [
            threading.Thread(target=cut, args=(e, n % 2 == 0)) for n, e in enumerate(engines)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(len(f) for f in found) == [0, 0, 0, 1]
        made = _periods(engine)
        assert [(p.name, p.status) for p in made[:1]] == [(first.name, "ended")]
        assert [p.status for p in made].count("open") == 1
        assert len(made) == 2 and made[1].after_id == made[0].last_id
        assert utc(made[1].starts_at) == utc(first.ends_at)
        [audited] = _audited(engine, "period.end")
        assert (audited.actor, audited.target) == (dated.ACTOR, first.name)
    finally:
        for e in engines:
            e.dispose()
        engine.dispose()


@pytest.mark.both_backends
def test_a_cut_missed_while_nothing_ran_is_made_before_the_first_booking(
    fresh_url: str, test_env: Any
) -> None:
    length = 2
    _until_a_second_or_more_left(length)
    engine = _migrate(fresh_url, _seconds(length))
    try:
        [first] = _periods(engine)
        # Nothing runs past two ends.
        _sleep_until(utc(first.ends_at) + dt.timedelta(seconds=length + 0.2))
        settings = test_env.settings(database_url=fresh_url, period="month", period_seconds=length)
        with TestClient(create_app(settings)):
            # The API made the missed cuts as it started, each period in turn.
            made = _periods(engine)
            assert [p.status for p in made[:2]] == ["ended", "ended"]
            assert [utc(p.starts_at) for p in made[1:]] == [utc(p.ends_at) for p in made[:-1]]
            settle_promo(engine, [promo_doc("V-1", [promo_line(1, "10", "1.25")])])
        with engine.connect() as conn:
            [booked] = conn.execute(select(ledger.c.period)).scalars()
        assert booked not in {made[0].name, made[1].name}
    finally:
        engine.dispose()


@pytest.mark.both_backends
def test_an_ended_period_is_closed_final_without_a_cut_and_an_open_dated_one_is_refused(
    fresh_url: str, test_env: Any
) -> None:
    # Long enough for the app to start on a busy machine before the first
    # period ends (the close before it must be refused).
    length = 12
    _until_a_second_or_more_left(length, 10)
    engine = _migrate(fresh_url, _seconds(length))
    try:
        [first] = _periods(engine)
        settle_promo(engine, [promo_doc("V-1", [promo_line(1, "10", "1.25")])])
        settings = test_env.settings(database_url=fresh_url, period="month", period_seconds=length)
        with TestClient(create_app(settings)) as http:
            refused = http.post(
                "/admin/periods/close", json={"period": first.name}, headers=OPERATOR
            )
            assert refused.status_code == 409
            assert refused.json()["error"]["code"] == "period_not_ended"
            assert "ends by itself at" in refused.json()["error"]["message"]
            ended = _wait_for(
                lambda: next(
                    (p for p in _periods(engine) if p.name == first.name and p.status == "ended"),
                    None,
                )
            )
            listed = http.get("/v1/periods", headers=VIEWER).json()["items"]
            mine = next(p for p in listed if p["name"] == first.name)
            assert (mine["status"], mine["rows"], mine["journal_sha256"]) == ("ended", 1, None)
            assert mine["ends_at"] is not None and mine["ended_at"] is not None
            preview = http.get(f"/v1/periods/{first.name}/journal", headers=VIEWER).json()
            assert preview["final"] is False
            wrong = http.post(
                "/admin/periods/close",
                json={"period": first.name, "next": "elsewhere"},
                headers=OPERATOR,
            )
            assert wrong.status_code == 409
            assert wrong.json()["error"]["code"] == "period_next_mismatch"
            before = [(p.name, p.status) for p in _periods(engine) if p.status != "ended"]
            # Only the first ended one closes first; the cutter goes on meanwhile.
            done = http.post(
                "/admin/periods/close",
                json={"period": first.name, "next": ended.next, "note": "reviewed"},
                headers=OPERATOR,
            )
            assert done.status_code == 200, done.text
            body = done.json()
            assert body["status"] == "closed" and len(body["journal_sha256"]) == 64
            journal = http.get(f"/v1/periods/{first.name}/journal", headers=VIEWER).json()
            assert journal["final"] is True and journal["sha256"] == body["journal_sha256"]
            # Its lines are dated the period's last day, not the close's.
            last_day = (utc(ended.ends_at) - dt.timedelta(microseconds=1)).date().isoformat()
            assert {e["accounting_date"] for e in journal["entries"]} == {last_day}
            again = http.post("/admin/periods/close", json={"period": first.name}, headers=OPERATOR)
            assert again.status_code == 200
            assert again.json()["journal_sha256"] == body["journal_sha256"]
        # The close cut nothing: the periods it found open or later are as they were.
        after = {p.name: p for p in _periods(engine)}
        assert all(after[name].status in (status, "ended") for name, status in before)
        assert after[first.name].closed_by is not None and after[first.name].note == "reviewed"
        assert len(_audited(engine, "period.close")) == 1
    finally:
        engine.dispose()


@pytest.mark.both_backends
def test_an_existing_deployment_migrates_manual_and_closes_as_before(
    fresh_url: str,
) -> None:
    config = alembic_config(fresh_url)
    config.attributes["first_period"] = "FY26-P12"
    command.upgrade(config, "0035")
    engine = make_engine(fresh_url)
    try:
        # `settleq migrate` with the default setting (month) on a ledger migrated before.
        upgrade(fresh_url, None, Settings().calendar())
        [first] = _periods(engine)
        assert (first.name, first.status) == ("FY26-P12", "open")
        assert (first.starts_at, first.ends_at, first.ended_at) == (None, None, None)
        # Nothing ends it but a close, which is the cut, as before.
        assert dated.catch_up(engine, Calendar("month"), "UTC", 30.0) == []
        settle_promo(engine, [promo_doc("V-1", [promo_line(1, "10", "1.25")])])
        closed = close.close(engine, "FY26-P12", "FY27-P01", None, OP, ACCOUNTS, 30.0)
        assert closed.created
        summary = reads.summary(engine, "FY26-P12", ACCOUNTS)
        assert summary.status == "closed" and summary.journal_sha256 is not None
        assert _open(engine).ends_at is None  # still manual
        # An operator moves to dated periods by closing into the calendar's name.
        today = Calendar("month").containing(dt.datetime.now(dt.UTC))
        close.close(engine, "FY27-P01", today.name, None, OP, ACCOUNTS, 30.0, Calendar("month"))
        now_open = _open(engine)
        assert (now_open.name, utc(now_open.ends_at)) == (today.name, today.ends_at)
        with engine.connect() as conn:
            assert booking.book(conn) == today.name
    finally:
        engine.dispose()


def test_a_manual_close_needs_its_next_name(fresh_url: str) -> None:
    engine = _migrate(fresh_url, None)
    try:
        name = _open(engine).name
        with pytest.raises(close.NextRequired):
            close.close(engine, name, None, None, OP, ACCOUNTS, 30.0)
        assert _open(engine).name == name
    finally:
        engine.dispose()


@pytest.mark.both_backends
def test_balances_carry_through_ended_periods_not_yet_closed(fresh_url: str) -> None:
    length = 4
    _until_a_second_or_more_left(length, 2.5)
    engine = _migrate(fresh_url, _seconds(length))
    calendar = _seconds(length)
    try:
        names = []
        for amount in ("1.25", "1.25"):
            names.append(_open(engine).name)
            settle_promo(engine, [promo_doc("V-1", [promo_line(1, "10", amount)])])
            ends = utc(_open(engine).ends_at)
            _sleep_until(ends + dt.timedelta(seconds=0.05))
            assert dated.cut_due(engine, calendar, "UTC", 30.0)
        settle_promo(engine, [promo_doc("V-1", [promo_line(1, "10", "1.25")])])
        # Two ended periods, not closed: the open one opens at their sum.
        _, [now] = reads.balances(engine, None, reads.sums.Scope(), ACCOUNTS)
        assert (now.opening, now.closing) == (Decimal("2.50"), Decimal("3.75"))
        _, [second] = reads.balances(engine, names[1], reads.sums.Scope(), ACCOUNTS)
        assert (second.opening, second.closing) == (Decimal("1.25"), Decimal("2.50"))
        # Closed in order, each carries the one before's closing.
        with pytest.raises(close.EarlierNotClosed):
            close.close(engine, names[1], None, None, OP, ACCOUNTS, 30.0)
        # (Every ended one: a machine that stalled past a period's end made
        # an empty one between them.)
        for name in [p.name for p in _periods(engine) if p.status == "ended"]:
            close.close(engine, name, None, None, OP, ACCOUNTS, 30.0)
        _, [second] = reads.balances(engine, names[1], reads.sums.Scope(), ACCOUNTS)
        assert (second.opening, second.closing) == (Decimal("1.25"), Decimal("2.50"))
        _, [now] = reads.balances(engine, None, reads.sums.Scope(), ACCOUNTS)
        assert (now.opening, now.closing) == (Decimal("2.50"), Decimal("3.75"))
    finally:
        engine.dispose()


def test_a_worker_makes_the_missed_cuts_before_it_consumes(fresh_url: str) -> None:
    from types import SimpleNamespace

    from services.worker.runner import _caught_up

    length = 2
    _until_a_second_or_more_left(length)
    engine = _migrate(fresh_url, _seconds(length))
    try:
        [first] = _periods(engine)
        _sleep_until(utc(first.ends_at) + dt.timedelta(seconds=0.1))
        settings = Settings(database_url=fresh_url, period_seconds=length)
        assert _caught_up(settings, SimpleNamespace(engine=engine), threading.Event())
        made = _periods(engine)
        assert made[0].status == "ended" and utc(_open(engine).ends_at) > utc(first.ends_at)
        stopped = threading.Event()
        stopped.set()
        assert not _caught_up(settings, SimpleNamespace(engine=engine), stopped)
    finally:
        engine.dispose()
