"""Letting a large file's pages go behind the reader and the mapping.

The front door keeps a large X12 file in a spooled file it maps, not in the
process's own memory (``services/api/edi/spool/file.py``): a mapped page of it is in
the process's RSS only from when it is read until it is let go (``forget``), and
the kernel reads it again from its page cache, the same bytes, if it is read
again. So every forward pass over a file's bytes (the reader's envelope scan,
its line-break and UTF-8 checks, the mapping of its sets in order) lets go of
what lies a window behind it, and none holds more than a few windows of the file
at once. A pass over ``bytes`` lets go of nothing: ``forget`` is a method of the
spooled file's buffer only, and letting go is never needed for a correct answer.

A pass that reads the file in one C call (a regular expression or a ``bytes``
method over all of it) would touch every page before it could let one go: such
passes go a window at a time (``windows``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

WINDOW = 2 << 20  # bytes a pass reads between two lettings go
_KEEP = 64 << 10  # bytes behind a pass kept (a set or a count may reach back a little)
_NEVER = 1 << 62


class Behind:
    """A forward pass over ``buf``, holding at most a window of it and a little
    more: ``due`` is the offset at which ``passed`` next lets go (never, for
    ``bytes``)."""

    __slots__ = ("_forget", "due")

    def __init__(self, buf: Any) -> None:
        self._forget: Callable[[int, int], None] | None = getattr(buf, "forget", None)
        self.due = WINDOW if self._forget is not None else _NEVER

    def passed(self, offset: int) -> int:
        """The pass is at ``offset``: once it has gone a window further, let go of
        all but the little it may still look back at. The new ``due``."""
        if self._forget is not None and offset >= self.due:
            self._forget(0, offset - _KEEP)
            self.due = offset + WINDOW
        return self.due

    def finished(self, offset: int) -> None:
        """The pass ended at ``offset``: let go of all it read (the next pass over
        the file starts again from the front, and it would hold this one's tail)."""
        if self._forget is not None:
            self._forget(0, offset)


def windows(
    buf: Any, start: int, stop: int, terminator: bytes | None = None
) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` pieces of ``buf[start:stop]``, each about a window long at
    most, letting go behind each. With ``terminator``, each but the last ends right
    after one (which no segment, line break or multi-byte character holds; a window
    without one runs to ``stop``). For ``bytes``, the whole range at once: nothing
    would be let go."""
    behind = Behind(buf)
    if behind.due == _NEVER:
        yield start, stop
        return
    try:
        yield from _pieces(buf, start, stop, terminator, behind)
    finally:  # also when the pass stops early
        behind.finished(stop)


def _pieces(
    buf: Any, start: int, stop: int, terminator: bytes | None, behind: Behind
) -> Iterator[tuple[int, int]]:
    while start < stop:
        if start + WINDOW >= stop:
            end = stop
        elif terminator is None:
            end = start + WINDOW
        else:
            cut = buf.rfind(terminator, start, start + WINDOW)
            end = stop if cut < start else cut + 1
        yield start, end
        behind.finished(end)
        start = end
