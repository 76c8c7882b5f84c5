"""When the relay holds events back: while the host's CPUs are contended (Linux
pressure stall information, cpu_pressure.py), so that settlement goes first,
but never past ``relay_defer_max_s`` after the oldest waiting event's commit."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection

from services.relay.cpu_pressure import CpuPressure
from shared.adapters.db import outbox

# Above this share of time with some task waiting for a CPU, the host counts as
# contended: an idle host reads ~0, one a 500,000-line batch saturates ~0.9-1.
CONTENDED = 0.5


def should_defer(
    pressure: float, oldest: dt.datetime | None, now: dt.datetime, max_defer_s: float
) -> bool:
    """Hold events back while the CPU is contended, but never past ``max_defer_s``
    after the oldest waiting one was committed (nor when none waits)."""
    if oldest is None or max_defer_s <= 0 or pressure < CONTENDED:
        return False
    return (now - oldest).total_seconds() < max_defer_s


def defer_now(conn: Connection, pressure: CpuPressure, max_defer_s: float) -> bool:
    """Whether the next batch waits; the outbox is read only on a contended host."""
    if not max_defer_s or not pressure.available:
        return False
    share = pressure.since_last()
    if share < CONTENDED:
        return False  # the common case: no query
    now = dt.datetime.now(dt.UTC)
    return should_defer(share, outbox.oldest_unpublished(conn), now, max_defer_s)
