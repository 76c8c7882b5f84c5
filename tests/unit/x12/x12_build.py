"""The shared value objects built by hand from text in our own style (``*``,
``>``, ``~`` and a line break): what the 997 tests acknowledge, independent of
the reader. Positions are file-wide and 1-based, the ISA being 1."""

from __future__ import annotations

from shared.domain.x12.model import (
    Delimiters,
    FunctionalGroup,
    Interchange,
    Segment,
    TransactionSet,
)

OURS = Delimiters(element="*", component=">", repetition=None, segment="~")


def segments(text: str, element: str = "*", terminator: str = "~") -> list[Segment]:
    raw = [s.strip("\r\n ") for s in text.split(terminator)]
    parts = [s.split(element) for s in raw if s]
    return [Segment(n, tag, tuple(elements)) for n, (tag, *elements) in enumerate(parts, 1)]


def interchanges(text: str) -> tuple[Interchange, ...]:
    """Every ISA..IEA of ``text``; an envelope out of order is an AssertionError."""
    queue = segments(text)
    out: list[Interchange] = []
    while queue:
        isa = _take(queue, "ISA")
        groups = []
        while queue[0].tag == "GS":
            gs = queue.pop(0)
            sets = []
            while queue[0].tag == "ST":
                st = queue.pop(0)
                body = []
                while queue[0].tag != "SE":
                    body.append(queue.pop(0))
                sets.append(TransactionSet(st, queue.pop(0), tuple(body)))
            groups.append(FunctionalGroup(gs, _take(queue, "GE"), tuple(sets)))
        out.append(Interchange(isa, _take(queue, "IEA"), tuple(groups), OURS))
    return tuple(out)


def _take(queue: list[Segment], tag: str) -> Segment:
    segment = queue.pop(0)
    assert segment.tag == tag, f"{tag} expected at {segment.position}, not {segment.tag}"
    return segment
