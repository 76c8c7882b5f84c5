"""The runbook for a close that fails halfway (issue 52 item 11): one step for
each way the close can stop, and a query that finds the booking lock's holder
by the keys the code takes it with."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.adapters.db.periods import booking

ROOT = Path(__file__).resolve().parents[2]


def runbook() -> str:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    runbooks = text.split("\n## Runbooks\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"\n### A close that fails halfway\n(.*?)(?=\n### |\Z)", runbooks, re.S)
    assert found, "docs/operations.md's runbooks have none for a close that fails halfway"
    return found.group(1)


@pytest.mark.regression
def test_the_runbook_says_what_to_do_for_each_way_a_close_stops() -> None:
    text = " ".join(runbook().split())
    for said in (
        "period_not_open",  # refused: nothing happens
        "409 close_waiting",  # gave up waiting: nothing cut
        "SETTLEQ_CLOSE_WAIT_S",
        "The cut failed",
        "The summing failed",
        "settleq periods list",
        "run the same close again",
    ):
        assert said.lower() in text.lower(), f"the runbook does not say {said!r}"


@pytest.mark.regression
def test_the_runbooks_query_names_the_booking_locks_keys() -> None:
    classid, objid = (key.strip() for key in booking._KEYS.split(","))
    text = runbook()
    assert f"l.classid = {classid}" in text and f"l.objid = {objid}" in text
