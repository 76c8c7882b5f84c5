"""The cyclic garbage collector, paused while a file is read or mapped."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Reading and mapping make a few objects per transaction set and free none until
    the end, so each of the collector's passes walks the whole growing heap for nothing:
    a third of the time on a 100,000-set file. Nothing made here refers to itself, so
    reference counting frees it all as usual."""
    if not gc.isenabled():  # already paused, by the caller or another thread
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
