"""``read_file``: a partner's X12 file, as sent, into its interchanges
(docs/architecture.md#edi-intake).

Each interchange's delimiters come from its own ISA (``envelope``). The
reader copes with what real files do (a BOM, CRLF or LF, indentation, two
segments on a line, trailing spaces, unpadded ISAs and U+00A0 padding,
80-column hard wraps, any terminator, several interchanges, groups and sets)
and refuses the rest with a specific code. It never splits repetitions:
elements are kept as sent, so ISA11 ``U`` before version 00402 cannot turn
SCAC ``CNRU`` into ``CNR``.

Encoding: UTF-8 (ASCII is UTF-8), strictly. Any byte sequence is valid
Latin-1, so guessing it would read a corrupt or Windows-1252 file silently
wrong; X12's own character set is ASCII, and a byte that is not UTF-8 is
``edi_encoding``, located.

Linear in the file's size, and it raises nothing but ``EdiRefused``.
"""

from __future__ import annotations

import re

from shared.domain.x12.model import EdiRefused, Interchange, Problem
from shared.domain.x12.problems import Problems
from shared.domain.x12.reading.envelope import Fatal, Header, first_isa, read_isa, skip_space
from shared.domain.x12.reading.pages import windows
from shared.domain.x12.reading.scan import (
    Region,
    Text,
    find_region,
    line_break_inside,
    not_utf8,
    syntax_problems,
)
from shared.domain.x12.reading.structure import EnvelopeReader

_END_OF_FILE = re.compile(rb"[ \t\r\n\x00\x1a]*+\Z")  # NUL or DOS EOF padding after the IEA


def read_file(data: bytes, *, fast: bool = True) -> tuple[Interchange, ...]:
    """The file's interchanges, their sets' body segments read when first asked for.

    ``data`` is ``bytes`` or a spooled file's mapped pages, which the interchanges
    then read their sets from (``shared.domain.x12.reading.pages``).

    Raises ``EdiRefused(problems)`` when the envelopes cannot be read, or
    ``EdiRefused(problems, interchanges)`` when they were read but a count, a
    control number or a duplicate is wrong (so a rejecting 997 can be written).
    ``fast=False`` reads every interchange the general way only, which the fast
    ways must agree with (tests compare them).
    """
    if isinstance(data, bytearray | memoryview):
        data = bytes(data)
    problems = Problems()
    interchanges: list[Interchange] = []
    try:
        _read(data, problems, interchanges, fast)
    except Fatal as exc:
        problems.add(exc.problem, fatal=True)
    if problems:
        found = problems.in_order()
        raise EdiRefused(found, None if problems.fatal else tuple(interchanges))
    return tuple(interchanges)


def _read(data: bytes, problems: Problems, interchanges: list[Interchange], fast: bool) -> None:
    start, position = first_isa(data), 1
    # Then no byte of any interchange can fail to be UTF-8.
    all_ascii = all(data[a:b].isascii() for a, b in windows(data, 0, len(data)))
    while True:
        header = read_isa(data, start, position)
        read = _in_one_scan(data, header, problems, all_ascii) if fast else None
        if read is None:
            region = find_region(data, header, start)
            problems.extend(syntax_problems(region, position + 1, problems.room), fatal=True)
            reader = EnvelopeReader(header, region, problems, fast=fast)
            interchange, position = reader.read()
        else:
            interchange, position, region = read
        if interchange is None:
            return
        interchanges.append(interchange)
        position += 1
        start = skip_space(data, region.resume)
        if data.startswith(b"ISA", start):
            continue
        if not _END_OF_FILE.match(data, start):
            near = data[start : start + 20].decode("utf-8", "replace")
            raise Fatal(
                Problem(
                    "edi_envelope",
                    f"after the IEA comes {near!r}, not an ISA",
                    segment=position,
                )
            )
        return


def _in_one_scan(
    data: bytes, header: Header, problems: Problems, all_ascii: bool
) -> tuple[Interchange, int, Region] | None:
    """The interchange at ``header`` as the general path reads it (its problems added),
    when that path finds no syntax problem in it: in one scan where the general path
    makes three, the envelope reader's also finding the IEA (``find_region``'s search)
    and checking every segment's tag (``syntax_problems``'), then whether a line break
    falls inside a segment and each byte is UTF-8. None, and no problem added, where
    it doubts: a syntax problem, a line break inside a segment (a hard wrap, or a
    missing terminator), no IEA or an ISA before it; the general path says what."""
    text = Text(data, data, header.terminator, header.element, header.newline)
    whole = Region(text, header.lead, len(data), False, len(data))
    found = Problems(problems.room)
    reader = EnvelopeReader(header, whole, found, check_tags=True)
    interchange, position = reader.read()
    if interchange is None or reader.untagged:
        return None
    stop = min(reader.iea_end + 1, len(data))  # as ``find_region`` ends it
    region = Region(text, header.lead, stop, True, stop)
    t = header.terminator
    if not header.newline and line_break_inside(data, header.lead, stop, t) is not None:
        return None
    if not all_ascii and not_utf8(region, header.isa.position + 1, problems.room):
        return None
    problems.fatal = problems.fatal or found.fatal
    problems.extend(found.items)
    return interchange, position, region
