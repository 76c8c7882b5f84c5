"""How a large 210 file's sets are shared between the request's thread and the
mapping children (``parent.py`` lays them out, ``child.py`` maps its blocks):
one module both read, so neither imports the other for it."""

from __future__ import annotations

from dataclasses import dataclass

# A cycle of blocks: the parent's, then each child's, in sets. With the parent
# mapping a child's block from its end, most splits map a large file in the same
# time; this one is among them and holds less at the API's peak than larger
# blocks, since a child's block is held whole, as its frame and then its lines,
# while it is taken (the A/B: docs/performance.md).
_OURS, _THEIRS = 600, 1000
_MIN_CYCLES = 2  # a smaller file is mapped in process: a child would cost more than it saves
_TIMEOUT_S = 5.0  # the longest the parent waits for one block of a child


@dataclass(frozen=True)
class Layout:
    """How a file's sets are shared: blocks of ``ours`` sets for the parent, then
    ``theirs`` for each of ``children`` children, over and over."""

    children: int
    ours: int = _OURS
    theirs: int = _THEIRS
    min_cycles: int = _MIN_CYCLES
    timeout_s: float = _TIMEOUT_S
    # Whether the parent, rather than wait for a child's block, maps it from its
    # end while the child maps it from its front, until they meet.
    share: bool = True

    @property
    def cycle(self) -> int:
        return self.ours + self.children * self.theirs

    @property
    def min_sets(self) -> int:
        """The fewest sets of a file its children map (a smaller one: in process)."""
        return self.min_cycles * self.cycle

    def spans(self, child: int, total: int) -> list[tuple[int, int]]:
        """The ``(start, stop)`` of child ``child``'s blocks (0-based)."""
        spans = []
        start = self.ours + child * self.theirs
        while start < total:
            spans.append((start, min(start + self.theirs, total)))
            start += self.cycle
        return spans
