"""glibc's malloc, told to give large blocks back to the system when they are freed.

glibc maps a block above its mmap threshold on its own, and unmaps it when it is
freed. But it raises that threshold each time such a block is freed (up to 32
MiB), so the next large blocks come from its heaps instead, which they fragment:
the API's peak RSS grew from 176 to 222 MiB over ten 500,000-line claims
(``bench.run --repeat 10``), each batch's chunk buffers landing somewhere new.
Fixing the threshold keeps every large block a mapping of its own, so each batch
starts from what the last one gave back. ``services/commands/cli.py`` calls this as the
API starts.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 128 * 1024  # glibc's own starting value, kept from being raised


def pin_mmap_threshold(threshold: int = THRESHOLD) -> bool:
    """Fix the mmap threshold at ``threshold`` bytes; False where the C library has
    no ``mallopt`` (musl, macOS), which then changes nothing."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
