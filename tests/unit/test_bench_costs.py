"""bench.costs' table: every process and service a line's CPU went to, beside
the floor's, and the whole machine's ratio."""

from __future__ import annotations

from bench.claim import Measured
from bench.costs import cost_table
from bench.floor import Floor


def test_the_table_sums_every_process_and_service_against_the_floor() -> None:
    m = Measured(lines=100_000, e2e_s=4.0, relay_cpu=0.5)
    m.stats = {"api": (100.0, 0.4), "heavy-0": (200.0, 1.0), "relay": (50.0, 0.2)}
    m.services = {"postgres": 1.5, "rabbitmq": 0.1, "redis": 0.05}
    floor = Floor(lines=100_000, seconds=2.0, cpu_s=0.5, chunks=20, server_cpu_s=0.6)
    table = cost_table(m, floor)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table if line.startswith("| ")}
    assert rows["api"] == "| api | 4.0 |  |"
    assert rows["relay"] == "| relay | 5.0 |  |"  # all its work, past the job's completion
    assert rows["postgres"] == "| postgres | 15.0 | 6.0 |"
    assert rows["floor's process"] == "| floor's process |  | 5.0 |"
    # 4 + 10 + 5 + 15 + 1 + 0.5 = 35.5 against 5 + 6 = 11.
    assert "| **whole machine** | **35.5** | **11.0** |" in table
    assert any("core-µs a line: 3.23" in line for line in table)
