"""A spooled file's pages as the X12 reader reads ``bytes`` (``file.py`` maps
them in the API, ``parallel/child.py`` in a mapping child): a module of its own, so that a
child imports none of the API's web stack."""

from __future__ import annotations

import mmap

_PAGE = mmap.PAGESIZE
_COUNT_PIECE = 1 << 20  # bytes copied at a time to count a byte in a long range


class Spooled(mmap.mmap):
    """A spooled file's pages, mapped read-only: what the reader reads as it reads
    ``bytes`` (slices, ``find``, regular expressions), with the few ``bytes``
    methods it calls that ``mmap`` lacks, and ``forget``."""

    def count(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        stop = len(self) if end is None else min(end, len(self))
        if len(sub) != 1:
            return self[start:stop].count(sub)
        total = 0
        while start < stop:  # a piece at a time: a long range is never copied whole
            piece = min(stop, start + _COUNT_PIECE)
            total += self[start:piece].count(sub)
            start = piece
        return total

    def startswith(self, prefix: bytes | tuple[bytes, ...], start: int = 0) -> bool:
        prefixes = (prefix,) if isinstance(prefix, bytes) else prefix
        return any(self[start : start + len(p)] == p for p in prefixes)

    def forget(self, start: int, stop: int) -> None:
        """Let go of the pages wholly inside ``[start, stop)``: they leave the
        process's memory, and are read again from the page cache if asked for."""
        first = -(-start // _PAGE) * _PAGE
        last = stop // _PAGE * _PAGE
        if last > first:
            self.madvise(mmap.MADV_DONTNEED, first, last - first)
