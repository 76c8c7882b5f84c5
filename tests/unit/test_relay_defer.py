"""The relay holds events back only while the host's CPUs are contended, and
never longer than ``relay_defer_max_s`` after the oldest was committed."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from services.relay.cpu_pressure import CpuPressure
from services.relay.deferral import should_defer

NOW = dt.datetime(2026, 11, 29, 20, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("pressure", "age_s", "max_s", "defer"),
    [
        (0.95, 5, 30, True),  # a saturated host, fresh events: settlement first
        (0.95, 30, 30, False),  # the bound reached: publish however busy
        (0.95, 45, 30, False),
        (0.2, 5, 30, False),  # an idle host publishes at once
        (0.95, 5, 0, False),  # deferring switched off
        (0.95, None, 30, False),  # nothing waits
    ],
)
def test_should_defer(pressure: float, age_s: float | None, max_s: float, defer: bool) -> None:
    oldest = None if age_s is None else NOW - dt.timedelta(seconds=age_s)
    assert should_defer(pressure, oldest, NOW, max_s) is defer


def _psi(path: Path, total_us: int) -> None:
    path.write_text(
        f"some avg10=0.00 avg60=0.00 avg300=0.00 total={total_us}\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )


def test_pressure_is_the_stalled_share_of_wall_time(tmp_path: Path) -> None:
    psi = tmp_path / "cpu"
    _psi(psi, 1_000_000)
    pressure = CpuPressure(psi)
    started = time.monotonic()
    time.sleep(0.2)
    _psi(psi, 1_000_000 + 150_000)  # 0.15 s of stall
    share = pressure.since_last()
    elapsed = time.monotonic() - started
    assert pressure.available
    assert share == pytest.approx(0.15 / elapsed, rel=0.05)
    assert pressure.since_last() == 0.0  # no stall since


def test_no_pressure_file_means_never_contended(tmp_path: Path) -> None:
    pressure = CpuPressure(tmp_path / "missing")
    assert not pressure.available and pressure.since_last() == 0.0
