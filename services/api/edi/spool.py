"""An X12 file's bytes kept in a spooled file as they arrive, not in the process.

A file is read whole once received (``services/api/edi/ingest.py``). Held as
``bytes``, a 60 MB file was 60 MB of the API's own memory from its last byte to
its 202, on top of what reading and mapping it hold. Here its parts are written
to an unnamed temporary file (``tempfile.TemporaryFile``: no name on disk, gone
when closed or the process dies), which is then mapped read-only. The reader
and the mapping let its pages go behind them (``shared.domain.x12.pages``), so
the process holds a few windows of the file at a time, and the kernel keeps the
rest in its page cache, which it may drop and read back: a partner's file's bytes
cost the API a few MiB while they are read, whatever their size (what grows with
the file is its sets' offsets: 20 MiB for 100,000 sets).

``TMPDIR`` says where the file goes. It should be a disk: a ``tmpfs`` keeps the
file in memory (as shared memory, not the API's own).
"""

from __future__ import annotations

import mmap
import tempfile
import weakref
from typing import IO, Any

from services.api.errors import ApiError

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


class Spool:
    """A file's parts written as they come, then mapped once complete."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self.size = 0

    def write(self, data: bytes) -> None:
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="settleq-x12-")  # noqa: SIM115
                # Closed however the request ends (a 401, a 413, a dropped client).
                weakref.finalize(self, self._file.close)
            self._file.write(data)
        except OSError as exc:
            self.close()
            raise _unavailable(exc) from None
        self.size += len(data)

    def mapped(self) -> Any:
        """The file's bytes: its pages mapped (``Spooled``), or ``b""`` when empty.
        The spool is closed; the mapping keeps the file until it is let go."""
        file, self._file = self._file, None
        if file is None or not self.size:
            if file is not None:
                file.close()
            return b""
        try:
            file.flush()
            return Spooled(file.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise _unavailable(exc) from None
        finally:
            file.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _unavailable(exc: OSError) -> ApiError:
    """A disk full or a mapping refused: the server's trouble, not the file's."""
    return ApiError(
        503,
        "spool_unavailable",
        f"the file could not be kept while it was received ({exc.strerror}): retry later",
    )
