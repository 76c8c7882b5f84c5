"""The layout stays readable: no production module over 300 lines, median at most 120.

Migrations are excepted (each is one schema step, written once), and so are
empty package markers, which would pull the median down without saying anything.
"""

from __future__ import annotations

import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 300
MAX_MEDIAN = 120


def _production_modules() -> dict[str, int]:
    sizes = {}
    for package in ("shared", "services"):
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines:
                sizes[str(path.relative_to(ROOT))] = lines
    return sizes


def test_no_production_module_is_over_300_lines() -> None:
    too_big = {name: n for name, n in _production_modules().items() if n > MAX_LINES}
    assert not too_big, f"split these along their concerns: {too_big}"


def test_the_median_production_module_is_at_most_120_lines() -> None:
    sizes = _production_modules()
    assert statistics.median(sizes.values()) <= MAX_MEDIAN
