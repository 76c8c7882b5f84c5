"""A large 210 file's fast path on two cores: a child process maps blocks of
sets while the request's thread maps the others.

Mapping a large 210 file is most of its POST (``freight_fast.fast_210_line``,
one core, the GIL). The child is started by a fork server, not forked from the
threaded API (``child.py`` says why and how): it is sent the file's spooled
descriptor and reads it again while the parent maps its first blocks. The sets are cut into
a repeating cycle of blocks: ``ours`` sets the parent maps itself, then
``theirs`` sets for each child. A child maps its block from the front with
``fast_210_line`` only; the parent, once at that block, maps it from the end
until the two meet (each says how far it got in one shared word), so neither
waits for the other however fast each runs: a second core shared with
PostgreSQL's inserts or another request costs the parent little. The child then
writes the block as one msgpack frame: its number and a list of
``FastLine | None`` (None: the fast path does not vouch for that set). The
parent yields the entries in the file's order (``MappedStream.entries_answered``):
a None is mapped by ``map_210`` with the stream's problems, so the documents,
the problems and their order, the skipped sets and the refusal are those of the
in-process path (tests/unit/test_edi_parallel.py compares them byte for byte).

Correctness never depends on a child. If it cannot be started, or it dies, is
killed, writes a short, garbled or misplaced frame, stops short of the sets left
to it, or takes longer than ``timeout_s`` for a block, the parent kills it and
maps every block left itself. The child is always reaped (killed first if still
running: a refusal, an exception or a generator closed early), so no zombie and
no orphan stays; should the parent die, the child's next write fails (EPIPE)
and it exits, as does the fork server.

The child, its pipe and the page the two share: ``services/api/edi/parallel/child.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import islice

from services.api.edi.parallel.child import CAN_START, Child, start_child, wanted
from services.api.edi.parallel.layout import Layout
from shared.domain.x12.mapping.files import Entries, MappedStream, kinds_by_set
from shared.domain.x12.mapping.freight_210.fast import FastLine, fast_210_line
from shared.domain.x12.mapping.sets import Place, Query

# What ``start`` uses unless told (the tests make its blocks a few sets).
default_layout = Layout(children=1)
# No 210 set is this short: a file of fewer bytes a set than this holds too few
# sets for children, whose start is then not worth it.
_MIN_SET_BYTES = 100


@dataclass
class Mappers:
    """The children started for one file, and the layout they follow."""

    layout: Layout
    children: list[Child | None]

    def stop(self) -> None:
        """Kill and reap those still running; at any time, any number of times."""
        for child in self.children:
            if child is not None:
                child.stop()


def start(source: int, size: int, head: bytes, query: Query, processes: int) -> Mappers | None:
    """Children for a file of ``size`` bytes open at ``source``, whose first bytes
    are ``head``, started as soon as it is received, so that each reads it while
    the request's thread does; None where the file is too small, plainly not a
    210 file, or there are none to start."""
    layout = replace(default_layout, children=processes - 1)
    if (
        not CAN_START
        or layout.children < 1
        or size < layout.min_sets * _MIN_SET_BYTES
        or not may_be_210(head)
    ):
        return None
    children = [start_child(source, query, layout, child) for child in range(layout.children)]
    return Mappers(layout, children)


def may_be_210(head: bytes) -> bool:
    """False only when the first transaction set in ``head`` is plainly of another
    kind (a file holds one kind, or is refused): a large 810 file then starts no
    child to read it again for nothing. Anything unclear: maybe."""
    isa = head.find(b"ISA")
    if isa < 0 or len(head) < isa + 106:
        return True
    separator, terminator = head[isa + 3 : isa + 4], head[isa + 105 : isa + 106]
    for segment in head[isa:].split(terminator)[:-1]:  # the last may be cut short
        elements = segment.strip().split(separator)
        if elements[0] == b"ST" and len(elements) > 1:
            kind = kinds_by_set().get(elements[1].strip().decode("latin-1"))
            return kind is not None and kind.x12_fast_path
    return True


def entries(stream: MappedStream, mappers: Mappers | None) -> Entries:
    """``stream.entries``, with ``mappers`` mapping their blocks when the file is
    a 210 file large enough (else in process, and they are stopped): the same
    entries, in the same order."""
    total = stream.set_count()
    if mappers is None or not wanted(stream.kind, total, mappers.layout):
        if mappers is not None:
            mappers.stop()
        return stream.entries
    return stream.entries_answered(lambda places: _answers(stream, places, mappers, total))


def _answers(
    stream: MappedStream, places: Iterator[Place], mappers: Mappers, total: int
) -> Iterator[tuple[Place, FastLine | None]]:
    """Each place's fast-path answer, in order: the parent's blocks mapped here,
    each child's taken from it (or mapped here once it failed)."""
    query, layout, children = stream.query, mappers.layout, mappers.children
    try:
        start, cycle = 0, 0
        while start < total:
            stop = min(start + layout.ours, total)
            yield from _mapped(places, stop - start, query)
            start = stop
            for child, mapper in enumerate(children):
                stop = min(start + layout.theirs, total)
                if start >= total:
                    break
                block = list(islice(places, stop - start))
                lines = None if mapper is None else mapper.block(cycle, block, query, layout)
                if lines is None:
                    children[child] = None
                    lines = [fast_210_line(place, query.at(place.interchange)) for place in block]
                yield from zip(block, lines, strict=True)
                start = stop
            cycle += 1
    finally:
        mappers.stop()


def _mapped(
    places: Iterator[Place], count: int, query: Query
) -> Iterator[tuple[Place, FastLine | None]]:
    for place in islice(places, count):
        yield place, fast_210_line(place, query.at(place.interchange))
