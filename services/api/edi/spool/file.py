"""An X12 file's bytes kept in a spooled file as they arrive, not in the process.

A file is read whole once received (``services/api/edi/ingest.py``). Held as
``bytes``, a 60 MB file was 60 MB of the API's own memory from its last byte to
its 202, on top of what reading and mapping it hold. Here its parts are written
to an unnamed temporary file (``tempfile.TemporaryFile``: no name on disk, gone
when closed or the process dies), which is then mapped read-only. The reader
and the mapping let its pages go behind them (``shared.domain.x12.reading.pages``), so
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

from services.api.edi.spool.pages import Spooled
from services.api.errors import ApiError


class Spool:
    """A file's parts written as they come, then mapped once complete."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._mapped: IO[bytes] | None = None  # the file once mapped, kept open for ``fileno``
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
        No more can be written; the file stays open until ``close`` (``fileno``),
        and the mapping keeps it until it is let go."""
        file, self._file = self._file, None
        if file is None or not self.size:
            if file is not None:
                file.close()
            return b""
        try:
            file.flush()
            body = Spooled(file.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            file.close()
            raise _unavailable(exc) from None
        self._mapped = file
        return body

    def fileno(self) -> int | None:
        """The mapped file's descriptor (a mapping child reads it: ``edi/parallel/child.py``),
        until ``close``."""
        return None if self._mapped is None else self._mapped.fileno()

    def close(self) -> None:
        for file in (self._file, self._mapped):
            if file is not None:
                file.close()
        self._file = self._mapped = None


def _unavailable(exc: OSError) -> ApiError:
    """A disk full or a mapping refused: the server's trouble, not the file's."""
    return ApiError(
        503,
        "spool_unavailable",
        f"the file could not be kept while it was received ({exc.strerror}): retry later",
    )
