"""How contended this host's CPUs are, from Linux pressure stall information.

``/proc/pressure/cpu`` counts, in ``total=`` microseconds, the time during which
at least one runnable task waited for a CPU. Its growth between two readings,
over the wall time between them, is the share of that time the CPUs were
oversubscribed: near 0 on an idle host, near 1 while a batch saturates it.
"""

from __future__ import annotations

import time
from pathlib import Path

PSI_CPU = Path("/proc/pressure/cpu")


def _stalled_us(path: Path) -> int | None:
    try:
        first = path.read_text().split("\n", 1)[0]  # "some avg10=… avg60=… avg300=… total=N"
    except OSError:
        return None
    for field in first.split():
        if field.startswith("total="):
            return int(field[6:])
    return None


class CpuPressure:
    """The share of wall time some task waited for a CPU since the last reading."""

    def __init__(self, path: Path = PSI_CPU) -> None:
        self._path = path
        self._last = (_stalled_us(path), time.monotonic())

    @property
    def available(self) -> bool:
        return self._last[0] is not None

    def since_last(self) -> float:
        """0.0 where the kernel does not report pressure (not Linux, or too old)."""
        stalled, now = _stalled_us(self._path), time.monotonic()
        before, then = self._last
        self._last = (stalled, now)
        if stalled is None or before is None or now <= then:
            return 0.0
        return min(1.0, (stalled - before) / ((now - then) * 1e6))
