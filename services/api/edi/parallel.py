"""A large 210 file's fast path on two cores: a forked child maps blocks of
sets while the request's thread maps the others.

Mapping a large 210 file is most of its POST (``freight_fast.fast_210_line``,
one core, the GIL). The file is read already:
a child made by ``os.fork()`` right before mapping holds it, its interchanges
and the query by copy-on-write, so nothing is sent to it. The sets are cut into
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

Correctness never depends on a child. If the fork fails, or a child dies, is
killed, writes a short, garbled or misplaced frame, stops short of the sets left
to it, or takes longer than ``timeout_s`` for a block, the parent kills it and
maps every block left itself. The child is always reaped (killed first if still
running: a refusal, an exception or a generator closed early), so no zombie and
no orphan stays; should the parent die, the child's next write fails (EPIPE)
and it exits.

The child, its pipe and the page the two share: ``services/api/edi/child.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from itertools import islice

from services.api.edi.child import CAN_FORK, Child, fork_child
from services.api.edi.layout import Layout
from shared.domain.x12.freight_fast import FastLine, fast_210_line
from shared.domain.x12.mapping import Entries, MappedStream
from shared.domain.x12.sets import Place, Query

# What ``entries`` uses unless told (the tests make its blocks a few sets).
default_layout = Layout(children=1)


def entries(stream: MappedStream, processes: int, layout: Layout | None = None) -> Entries:
    """``stream.entries``, mapped by ``processes`` processes when the file is a 210
    file large enough (else in process): the same entries, in the same order."""
    if layout is None:
        layout = replace(default_layout, children=processes - 1)
    total = stream.set_count() if stream.kind == "freight_audit" else 0
    if not CAN_FORK or layout.children < 1 or total < layout.min_cycles * layout.cycle:
        return stream.entries
    return stream.entries_answered(lambda places: _answers(stream, places, layout, total))


def _answers(
    stream: MappedStream, places: Iterator[Place], layout: Layout, total: int
) -> Iterator[tuple[Place, FastLine | None]]:
    """Each place's fast-path answer, in order: the parent's blocks mapped here,
    each child's taken from it (or mapped here once it failed)."""
    query = stream.query
    children: list[Child | None] = []
    try:
        for child in range(layout.children):
            children.append(fork_child(stream, query, layout.spans(child, total)))
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
                    lines = [fast_210_line(place, query) for place in block]
                yield from zip(block, lines, strict=True)
                start = stop
            cycle += 1
    finally:
        for mapper in children:
            if mapper is not None:
                mapper.stop()


def _mapped(
    places: Iterator[Place], count: int, query: Query
) -> Iterator[tuple[Place, FastLine | None]]:
    for place in islice(places, count):
        yield place, fast_210_line(place, query)
