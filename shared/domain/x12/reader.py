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

from shared.domain.x12.envelope import Fatal, first_isa, read_isa, skip_space
from shared.domain.x12.gcpause import collector_paused
from shared.domain.x12.model import EdiRefused, Interchange, Problem
from shared.domain.x12.problems import Problems
from shared.domain.x12.scan import find_region, syntax_problems
from shared.domain.x12.structure import EnvelopeReader

_END_OF_FILE = re.compile(rb"[ \t\r\n\x00\x1a]*+\Z")  # NUL or DOS EOF padding after the IEA


def read_file(data: bytes) -> tuple[Interchange, ...]:
    """The file's interchanges, their sets' body segments read when first asked for.

    Raises ``EdiRefused(problems)`` when the envelopes cannot be read, or
    ``EdiRefused(problems, interchanges)`` when they were read but a count, a
    control number or a duplicate is wrong (so a rejecting 997 can be written).
    """
    data = bytes(data)
    problems = Problems()
    interchanges: list[Interchange] = []
    try:
        with collector_paused():
            _read(data, problems, interchanges)
    except Fatal as exc:
        problems.add(exc.problem, fatal=True)
    if problems:
        found = problems.in_order()
        raise EdiRefused(found, None if problems.fatal else tuple(interchanges))
    return tuple(interchanges)


def _read(data: bytes, problems: Problems, interchanges: list[Interchange]) -> None:
    start, position = first_isa(data), 1
    while True:
        header = read_isa(data, start, position)
        region = find_region(data, header, start)
        problems.extend(syntax_problems(region, position + 1, problems.room), fatal=True)
        interchange, position = EnvelopeReader(header, region, problems).read()
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
