"""`settleq periods close` of a dated period (docs/operations.md#the-month-end-close):
an ended one closes without --next; an open one is refused until its end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import ensure_internal_key, upgrade
from shared.domain.period_dates import Calendar
from tests.integration.test_periods_cli import settleq
from tests.support.factories import promo_doc, promo_line
from tests.support.infra import OPERATOR_TOKEN, ServiceEnv
from tests.support.periods import settle_promo
from tests.support.served import api_in_thread
from tests.unit.conftest import restore_logging  # noqa: F401 - the CLI configures logging

pytestmark = pytest.mark.usefixtures("restore_logging")
# Long enough for two command-line runs on a busy machine before the first
# period ends (the close before it must be refused).
LENGTH = 15


@pytest.fixture
def served(tmp_path: Path, test_env: ServiceEnv) -> Iterator[tuple[str, Engine]]:
    """An API over a fresh SQLite ledger of periods LENGTH seconds long."""
    left = LENGTH - time.time() % LENGTH
    if left < 12:
        time.sleep(left + 0.05)
    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    upgrade(database, None, Calendar("seconds", "UTC", LENGTH))
    engine = make_engine(database)
    ensure_internal_key(engine)
    settings = test_env.settings(database_url=database, period="month", period_seconds=LENGTH)
    try:
        with api_in_thread(settings) as url:
            yield url, engine
    finally:
        engine.dispose()


def test_an_ended_period_closes_from_the_command_line_without_next(
    served: tuple[str, Engine],
) -> None:
    url, engine = served
    settle_promo(engine, [promo_doc("V-1", [promo_line(1, "10", "1.25")])])
    listed = settleq(url, "periods", "list", "--json").stdout
    [first] = [p for p in json.loads(listed)["items"] if p["status"] == "open"]
    refused = settleq(url, "periods", "close", first["name"], "--yes", token=OPERATOR_TOKEN, code=1)
    assert "409 period_not_ended" in refused.stderr
    deadline = time.monotonic() + 30
    while (
        json.loads(settleq(url, "periods", "list", "--json").stdout)["items"][-1]["status"]
        == "open"
    ):
        assert time.monotonic() < deadline, "the API's cutter did not end the period"
        time.sleep(0.2)
    # Reviewed once ended: its balances no longer change, and it is not final yet.
    reviewed = settleq(url, "balances", "--period", first["name"]).stdout
    assert f"period {first['name']} (ended: they no longer change" in reviewed
    closed = settleq(url, "periods", "close", first["name"], "--yes", token=OPERATOR_TOKEN)
    assert f"closed {first['name']}: 1 ledger rows; it ended at" in closed.stdout
    assert "journal sha256" in closed.stdout
