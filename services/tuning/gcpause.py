"""The cyclic garbage collector, paused by an entry point around work that
makes many objects and frees none until it ends.

Reading an X12 file, mapping its sets and writing its 997 make a few objects
per transaction set and free none until the end, so each of the collector's
passes would walk the whole growing heap for nothing. Nothing they make refers
to itself, so reference counting frees it all as usual. The domain code stays
free of process tuning: the API (``services/api/edi/ingest.py``,
``edi/refusal.py``) and the benches that time the same work pause it here.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection inside the block; a block already inside another (or a
    thread's, as the switch is the process's) leaves the switch to it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
