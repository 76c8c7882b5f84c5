"""No hypothesis test is timed (tests/conftest.py's profile): a deadline fails
at random on a busy machine, and CI must pass on one (issue 42, item 18)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import settings

pytestmark = pytest.mark.regression

TESTS = Path(__file__).resolve().parents[1]


def test_the_profile_times_no_example() -> None:
    assert settings.default.deadline is None


def test_no_test_sets_a_deadline() -> None:
    # A keyword argument (formatted without spaces), not a waiting loop's
    # ``deadline = time.monotonic() + ...``.
    timed = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bdeadline=(?!None\b)", line)
    ]
    assert not timed, f"hypothesis deadlines: {timed}"
